#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The .deb package end to end: `cpack -G DEB` in the build folder, the package's metadata and
# contents (both programs, the desktop entry, the icon), then the package unpacked into a
# scratch root and its sinkscope-cli run from there (--version, and `config check` on a shipped
# example config). Usage: deb_install.sh BUILD_DIR SOURCE_DIR. Exit 77 (skip) without
# dpkg-deb.
set -uo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
command -v dpkg-deb >/dev/null 2>&1 || { echo "SKIP: dpkg-deb not found"; exit 77; }
work="$BUILD/deb-test"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "deb_install: FAIL: $*"; exit 1; }
# CPack's dependency scan (CPACK_DEBIAN_PACKAGE_SHLIBDEPS) runs both; scripts/setup.sh installs them.
for tool in file dpkg-shlibdeps; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (install dpkg-dev and file)"
done

(cd "$BUILD" && cpack -G DEB -B "$work" >"$work/cpack.log" 2>&1) ||
  { tail -n 30 "$work/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(ls "$work"/sinkscope_*.deb 2>/dev/null | head -n 1)
[[ -n "$deb" ]] || fail "no sinkscope_*.deb in $work"
echo "deb_install: built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

info=$(dpkg-deb --info "$deb") || fail "dpkg-deb --info failed"
grep -q "^ Package: sinkscope$" <<<"$info" || fail "the package is not named sinkscope"
grep -q "^ Version: " <<<"$info" || fail "no Version field"
grep -q "^ Depends: .*libopenblas" <<<"$info" || fail "Depends does not name OpenBLAS: $(grep Depends <<<"$info")"

contents=$(dpkg-deb --contents "$deb") || fail "dpkg-deb --contents failed"
grep -q " ./usr/bin/sinkscope-cli\$" <<<"$contents" || fail "./usr/bin/sinkscope-cli is not in the package"
# The desktop entry and the icon belong to the workbench: a build without the GUI ships neither.
if [[ -x "$BUILD/app/gui/sinkscope" ]]; then
  grep -q " ./usr/share/applications/sinkscope.desktop\$" <<<"$contents" ||
    fail "./usr/share/applications/sinkscope.desktop is not in the package"
  grep -q " ./usr/bin/sinkscope\$" <<<"$contents" || fail "the workbench is not in the package"
  grep -q "sinkscope.svg\$" <<<"$contents" || fail "the icon is not in the package"
fi

root="$work/root"
dpkg-deb -x "$deb" "$root" || fail "dpkg-deb -x failed"
version=$("$root/usr/bin/sinkscope-cli" --version) || fail "sinkscope-cli --version failed"
[[ "$version" == sinkscope-cli* ]] || fail "unexpected --version output: $version"
"$root/usr/bin/sinkscope-cli" config check "$SRC/resources/configs/dense-default.yaml" >/dev/null ||
  fail "the installed sinkscope-cli could not check a config"
echo "deb_install: installed into $root: $version"
echo "deb_install: all checks passed"
