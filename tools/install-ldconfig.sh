#!/bin/sh
# tools/install-ldconfig.sh LIBDIR: meson's post-install step: runs ldconfig when LIBDIR is one the
# dynamic linker searches and we may write its cache (root, no DESTDIR); else says what to do.
libdir=$1
[ -n "${DESTDIR:-}" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "install: libgraft.so.0 is in $libdir; if that folder is not on the linker's path, run"
    echo "         programs with LD_LIBRARY_PATH=$libdir or link them with -Wl,-rpath,$libdir"
    exit 0
fi
if command -v ldconfig >/dev/null 2>&1 || [ -x /sbin/ldconfig ]; then
    PATH=$PATH:/sbin:/usr/sbin
    if ldconfig -v -N 2>/dev/null | grep -q "^$libdir:"; then
        ldconfig && echo "install: ran ldconfig for $libdir"
    else
        echo "install: $libdir is not on the dynamic linker's path: run programs linked with"
        echo "         pkg-config --libs graft with LD_LIBRARY_PATH=$libdir, or add -Wl,-rpath,$libdir"
    fi
fi
