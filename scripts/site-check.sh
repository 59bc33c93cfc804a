#!/usr/bin/env bash
# Open a campaign's HTML site in headless Chromium (Debian's `chromium`): every page must
# load with no console message and no request leaving the page (every host name is mapped
# to nothing, so a request would be logged as an error); a screenshot of each page is kept.
# Usage: scripts/site-check.sh [outputs/x86_1]   (installs chromium with apt if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
site=${1:-outputs/x86_1}/site
[ -f "$site/index.html" ] || { echo "no $site/index.html: run the campaign first" >&2; exit 2; }
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
shots=${SHOTS:-$(mktemp -d)}
mkdir -p "$shots"
status=0
for page in "$site"/*.html; do
    name=$(basename "$page" .html)
    log=$(chromium --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$(mktemp -d)" --enable-logging=stderr --v=0 \
        --host-resolver-rules='MAP * ~NOTFOUND' --window-size=1500,2200 \
        --screenshot="$shots/$name.png" "file://$(realpath "$page")" 2>&1 >/dev/null) || true
    if grep -qE 'CONSOLE|ERR_NAME_NOT_RESOLVED|net::ERR' <<<"$log"; then
        echo "FAIL $page:"; grep -E 'CONSOLE|net::ERR' <<<"$log"; status=1
    elif [ ! -s "$shots/$name.png" ]; then
        echo "FAIL $page: no screenshot"; status=1
    else
        echo "ok   $page -> $shots/$name.png"
    fi
done
exit $status
