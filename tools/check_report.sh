#!/usr/bin/env bash
# tools/check_report.sh DIR: renders DIR/report.html in headless Chromium to DIR/report.png and
# checks the screenshot exists, is of a sensible size and is not blank (PASS/FAIL/SKIP lines).
set -uo pipefail
if [ $# != 1 ]; then echo "FAIL usage: check_report.sh DIR"; exit 1; fi
dir=$(cd "$1" 2>/dev/null && pwd) || { echo "FAIL report_dir: no folder $1"; exit 1; }
html=$dir/report.html png=$dir/report.png
[ -f "$html" ] || { echo "FAIL report_exists: no $html"; exit 1; }
echo "PASS report_exists"
browser=""
for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then echo "SKIP report_screenshot: chromium is not installed"; exit 0; fi
rm -f "$png"
profile=$(mktemp -d)
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$profile" --screenshot="$png" --window-size=1280,2000 \
    "file://$html" >"$dir/chromium.log" 2>&1
rm -rf "$profile"
if [ ! -s "$png" ]; then
    echo "FAIL report_screenshot: no screenshot; chromium said:"; tail -5 "$dir/chromium.log"
    exit 1
fi
echo "PASS report_screenshot"
python3 - "$png" <<'PY'
import os, sys
png = sys.argv[1]
size = os.path.getsize(png)
print(f"PASS report_png_size ({size} bytes)" if size > 20000 else f"FAIL report_png_size: {size} bytes")
try:
    from PIL import Image
except ImportError:
    print("SKIP report_not_blank: Pillow is not installed")
    sys.exit(0 if size > 20000 else 1)
im = Image.open(png).convert("RGB")
colors = im.getcolors(maxcolors=1 << 20) or []
ok_dim = im.size == (1280, 2000)
print("PASS report_png_dimensions" if ok_dim else f"FAIL report_png_dimensions: {im.size}")
# A blank page has a handful of colours; text, curves and the shaded matrix give hundreds.
n = len(colors)
top = max(c for c, _ in colors) / (im.size[0] * im.size[1]) if colors else 1
ok = n > 200 and top < 0.9
print(f"PASS report_not_blank ({n} colours)" if ok else
      f"FAIL report_not_blank: {n} colours, the commonest covers {top:.0%}")
sys.exit(0 if size > 20000 and ok and ok_dim else 1)
PY
