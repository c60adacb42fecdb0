#!/bin/sh
# The Studio in a real window: an X server (Xvfb) with a window manager (openbox) at 1280x720 and 1920x1080, and
# test_ui_workbench's real-window case on each (the frame within the available area, the docks after maximise).
# Exit 77 (ctest: skipped) when Xvfb or openbox is not installed.
# usage: real_window.sh TEST_BINARY
set -u
test_binary="$1"
if ! command -v Xvfb > /dev/null || ! command -v openbox > /dev/null; then
  echo "SKIP: needs Xvfb and openbox (tools/install-deps.sh installs them)"
  exit 77
fi
work="$(mktemp -d)"
xvfb=""
wm=""
cleanup() {
  [ -n "$wm" ] && kill "$wm" 2> /dev/null
  [ -n "$xvfb" ] && kill "$xvfb" 2> /dev/null
  wait 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
status=0
for size in 1280x720 1920x1080; do
  # A free display number, chosen by the server itself.
  : > "$work/display"
  Xvfb -displayfd 5 -screen 0 "${size}x24" -nolisten tcp 5> "$work/display" 2> "$work/xvfb.log" &
  xvfb=$!
  tries=0
  while [ ! -s "$work/display" ] && [ $tries -lt 100 ]; do sleep 0.1; tries=$((tries + 1)); done
  if [ ! -s "$work/display" ]; then echo "colibri: Xvfb did not start: $(cat "$work/xvfb.log")"; exit 1; fi
  DISPLAY=":$(head -n1 "$work/display")"
  export DISPLAY
  HOME="$work" openbox --sm-disable > "$work/openbox.log" 2>&1 &
  wm=$!
  # The window manager is up once it has announced itself on the root window.
  tries=0
  while ! xprop -root _NET_SUPPORTING_WM_CHECK 2> /dev/null | grep -q "window id" && [ $tries -lt 100 ]; do sleep 0.1; tries=$((tries + 1)); done
  sleep 0.5  # and a moment to finish starting
  echo "== $size on $DISPLAY with openbox"
  QT_QPA_PLATFORM=xcb XDG_CONFIG_HOME="$work/config" "$test_binary" real_window_fits_and_docks_show_after_maximise || status=1
  kill "$wm" "$xvfb" 2> /dev/null
  wait "$wm" "$xvfb" 2> /dev/null
  wm=""
  xvfb=""
done
exit $status
