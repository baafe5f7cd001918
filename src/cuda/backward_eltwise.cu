// backward_eltwise.cu: (in progress)
