# Shared by the device-call scripts under results/reference/ (sourced from the
# repository root, after `R` names the folder a script collects into). The
# scripts ran these same definitions inline when their results were made;
# they were moved here unchanged so that the next script sources them.

# unxz FILE.xz OUT: the compressed binary carried to the device, unpacked
# with Python (the device machine has no xz) and made executable.
unxz() { python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$1" "$2" && chmod +x "$2"; }

# step NAME COMMAND...: runs COMMAND with its stdout and stderr in
# $R/NAME.stdout and $R/NAME.stderr, and logs its exit status and wall time
# to $R/steps.log.
step() { # name, command...
  local name=$1; shift
  echo "== $name: $* ($(date -u +%H:%M:%S))" | tee -a "$R/steps.log"
  local start=$(date +%s.%N)
  "$@" > "$R/$name.stdout" 2> "$R/$name.stderr"; local rc=$?
  echo "$name rc=$rc wall_s=$(python3 -c "import time;print(round(time.time()-$start,1))")" | tee -a "$R/steps.log"
}
