#!/usr/bin/env bash
# tests/test_install.sh BUILD: `meson install` of BUILD into a scratch DESTDIR, checked as a C
# library user would: the versioned SONAME, the installed graft's RUNPATH, graft.pc (shared and
# --static: no file paths), and examples/transfer_resnet.c built and run against the install.
set -u
BUILD=$1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
DEST=$TMP/root
if ! DESTDIR=$DEST meson install -C "$BUILD" --no-rebuild --quiet >"$TMP/install.log" 2>&1; then
    fail install "meson install: $(tail -3 "$TMP/install.log")"
    exit 0
fi
pc=$(find "$DEST" -name graft.pc | head -1)
if [ -z "$pc" ]; then fail install_pkgconfig "no graft.pc installed"; exit 0; fi
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$DEST
libdir=$(pkg-config --variable=libdir graft | sed "s#^$DEST##")
bindir=$(sed -n 's/^prefix=//p' "$pc")/bin
L=$DEST$libdir

soname=$(readelf -d "$L/libgraft.so.0" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [ "$soname" = libgraft.so.0 ] && [ -L "$L/libgraft.so" ] && [ -f "$L/libgraft.so.0.1.0" ]; then
    pass install_soname
else fail install_soname "soname '$soname'; $(ls "$L")"; fi

runpath=$(readelf -d "$DEST$bindir/graft" | sed -n 's/.*Library runpath: \[\(.*\)\]/\1/p')
needed=$(readelf -d "$DEST$bindir/graft" | sed -n 's/.*Shared library: \[\(libgraft[^]]*\)\]/\1/p')
if [ "$runpath" = "$libdir" ] && [ "$needed" = libgraft.so.0 ]; then pass install_graft_runpath
else fail install_graft_runpath "RUNPATH '$runpath' (want $libdir), NEEDED '$needed'"; fi
# (LD_LIBRARY_PATH only because the install sits under DESTDIR; a real one needs none.)
if LD_LIBRARY_PATH=$L "$DEST$bindir/graft" version | grep -q '^graft '; then pass install_graft_runs
else fail install_graft_runs "$(LD_LIBRARY_PATH=$L "$DEST$bindir/graft" version 2>&1 | tail -2)"; fi

libs=$(pkg-config --libs graft) cflags=$(pkg-config --cflags graft)
static=$(pkg-config --static --libs graft)
if [ $? = 0 ] && ! grep -qE '(^| )/[^ ]*\.(so|a)( |$)' <<<"$static"; then pass install_pkgconfig_static
else fail install_pkgconfig_static "pkg-config --static --libs graft: $static"; fi

EX=$ROOT/examples/transfer_resnet.c
# shellcheck disable=SC2086
if cc "$EX" -o "$TMP/ex_shared" $cflags $libs -lm 2>"$TMP/cc.log"; then
    LD_LIBRARY_PATH=$L "$TMP/ex_shared" >"$TMP/ex.txt" 2>&1
    rc=$?
    if [ $rc = 2 ] && grep -q usage "$TMP/ex.txt" &&
        LD_LIBRARY_PATH=$L ldd "$TMP/ex_shared" | grep -q "libgraft.so.0 => $L/"; then
        pass install_example_shared
    else fail install_example_shared "rc $rc: $(head -2 "$TMP/ex.txt")"; fi
else fail install_example_shared "$(head -5 "$TMP/cc.log")"; fi
# Static libgraft.a (its dependencies shared): every flag --static gives must link.
# shellcheck disable=SC2086
if cc "$EX" -o "$TMP/ex_static" $cflags ${static/-lgraft/-l:libgraft.a} -lm 2>"$TMP/cc.log"; then
    "$TMP/ex_static" >"$TMP/ex.txt" 2>&1
    rc=$?
    if [ $rc = 2 ] && ! ldd "$TMP/ex_static" | grep -q libgraft; then pass install_example_static
    else fail install_example_static "rc $rc: $(head -2 "$TMP/ex.txt")"; fi
else fail install_example_static "$(head -5 "$TMP/cc.log")"; fi
