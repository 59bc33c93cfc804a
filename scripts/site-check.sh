#!/usr/bin/env bash
# Open a campaign's HTML site in headless Chromium (Debian's `chromium`) at 1400 and 390 CSS
# px widths. Per page and width: no console message; no request leaving the page (every
# host name is mapped to nothing; the checker also lists the page's resource requests); and
# layout checks run in the browser by scripts/site-check.html (the page in an iframe of that
# width): the page is no wider than the viewport (tables may scroll in their own box), every
# SVG label lies inside its viewBox, overlaps no other label and is drawn at 9 px or more.
# A full-height screenshot of each page and width is kept (SHOTS=dir, else a temporary one).
# Usage: scripts/site-check.sh [outputs/x86_1]   (installs chromium with apt if missing)
# Exit status 1 on any failure, each printed as "FAIL page @ width: what".
set -euo pipefail
cd "$(dirname "$0")/.."
site=${1:-outputs/x86_1}/site
[ -f "$site/index.html" ] || { echo "no $site/index.html: run the campaign first" >&2; exit 2; }
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
checker="file://$(realpath scripts/site-check.html)"
shots=${SHOTS:-$(mktemp -d)}
mkdir -p "$shots"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

# chromium ARGS...: stderr (the log) on stdout, the page's output discarded unless asked for
browse() {
    chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --enable-logging=stderr --v=0 \
        --allow-file-access-from-files --host-resolver-rules='MAP * ~NOTFOUND' \
        --virtual-time-budget=5000 "$@"
}

# percent-encode a file URL for the checker's query string
uri() {
    local LC_ALL=C s=$1 o= c i
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
            [a-zA-Z0-9/._~:-]) o+=$c ;;
            *) printf -v c '%%%02X' "'$c"; o+=$c ;;
        esac
    done
    echo "$o"
}

status=0
for page in "$site"/*.html; do
    name=$(basename "$page" .html)
    url=$(uri "file://$(realpath "$page")")
    for width in 1400 390; do
        window=$((width > 500 ? width : 500)) # headless windows are at least 500 px wide
        fails=()
        # pass 1: the checks, and the page height at this width
        dom=$(mktemp)
        log=$(browse --window-size="$window,900" --dump-dom \
            "$checker?page=$url&width=$width" 2>&1 >"$dom") || true
        result=$(awk '/<pre id="result">/ { on = 1 } on { print } on && /<\/pre>/ { exit }' "$dom" |
            sed -e 's/.*<pre id="result">//' -e 's/<\/pre>.*//' \
                -e 's/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g; s/&amp;/\&/g')
        rm -f "$dom"
        height=$(sed -n 's/^height \([0-9]*\)$/\1/p' <<<"$result")
        [ -n "$height" ] || fails+=("the checker gave no result")
        while IFS= read -r line; do
            [ -n "$line" ] && fails+=("${line#FAIL }")
        done < <(grep '^FAIL ' <<<"$result" || true)
        # pass 2: the screenshot, as tall as the page (capped: a texture has a size limit)
        height=${height:-900}
        shot="$shots/$name-$width.png"
        log+=$'\n'$(browse --window-size="$window,$((height < 16000 ? height : 16000))" \
            --screenshot="$shot" "$checker?page=$url&width=$width" 2>&1 >/dev/null) || true
        [ -s "$shot" ] || fails+=("no screenshot")
        while IFS= read -r line; do
            fails+=("$line")
        done < <(grep -E 'CONSOLE|net::ERR' <<<"$log" || true)
        if [ ${#fails[@]} -eq 0 ]; then
            echo "ok   $page @ $width px -> $shot"
        else
            status=1
            for f in "${fails[@]}"; do echo "FAIL $page @ $width px: $f"; done
        fi
    done
done
exit $status
