#!/usr/bin/env bash
# Screenshot an envcheck HTML report with headless Chromium, at a laptop and a phone width,
# to check by eye that it reads well and that nothing reaches the network.
#
#   tools/dev/screenshot_report.sh REPORT.html [OUT_DIR]
#
# Writes OUT_DIR/<name>.desktop.png (1400 px wide) and OUT_DIR/<name>.phone.png (390 px).
# The browser is $CHROMIUM, else the first of chromium, chromium-browser, google-chrome on PATH.
# Exit status: 0 on success, 2 on bad usage, 3 when no browser is found, 1 when a screenshot failed.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 REPORT.html [OUT_DIR]" >&2
  exit 2
fi
html=$1
out_dir=${2:-$(dirname "$html")}
if [[ ! -f $html ]]; then
  echo "$0: no such file: $html" >&2
  exit 2
fi

browser=${CHROMIUM:-}
if [[ -z $browser ]]; then
  for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null 2>&1; then
      browser=$(command -v "$candidate")
      break
    fi
  done
fi
if [[ -z $browser ]]; then
  echo "$0: no Chromium found (install it: apt-get install -y chromium, or set CHROMIUM)" >&2
  exit 3
fi

mkdir -p "$out_dir"
url="file://$(cd "$(dirname "$html")" && pwd)/$(basename "$html")"
name=$(basename "$html" .html)
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

shoot() {  # shoot WIDTH LABEL
  local png="$out_dir/$name.$2.png"
  rm -f "$png"
  # --disable-background-networking & co: a report must render offline; the browser itself must not phone home.
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
    --user-data-dir="$profile" --window-size="$1,2400" --screenshot="$png" "$url" >/dev/null 2>&1 || true
  if [[ ! -s $png ]]; then
    echo "$0: $browser wrote no screenshot for width $1" >&2
    return 1
  fi
  echo "$png"
}

shoot 1400 desktop
shoot 390 phone
