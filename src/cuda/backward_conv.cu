// backward_conv.cu: (in progress)
