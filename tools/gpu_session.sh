#!/usr/bin/env bash
# The GPU tier in one go, on a GPU machine with no network: set up .venv/ from the image's torch
# and Triton (installing nothing), then run each step named on the command line, logging under
# $OUT (default gpu-logs/). Steps:
#   calibrate-NAME     tools/calibrate_NAME.py (figures for that assignment's handout)
#   grade-NAME         grade solutions/ for assignment NAME on the GPU, keeping results.json
#   grade-all          grade solutions/ for every assignment at once (side by side), the same way
#   "pytest ARGS..."   .venv/bin/python -m pytest -m gpu ARGS (one quoted word)
#   "beside ARGS..."   the same pytest, with a grading of solutions/ gelu and softmax running beside it
#   steady-alone-N[-K] tools/steady_grade.py alone --runs N (numbered from K): solutions/ graded N times (with
#                      with-STEADY_REPO=DIR before it: that checkout's, to compare two commits in one call)
#   steady-together    tools/steady_grade.py together: 3 rounds of 4 gradings of gelu + softmax at once,
#                      half the cores spinning
#   steady-beside[-N]  tools/steady_grade.py beside: gelu + softmax graded again and again while flash_attention
#                      grades from an empty cache (compilers at nice N: -0 shows what the default buys)
#   cold-NAME          grade solutions/ for assignment NAME with an empty cache of its own (XDG_CACHE_HOME), timed
#                      (STEADY_REPO: that checkout's; COLD_TAG=T: its files named cold-NAME-T)
#   class-N            tools/class_grade.py: a class of N full copies of solutions/ graded by batch, 6 workers on
#                      the GPU, stopped after 500 s; again in the next call (the class and its gradebook stay under
#                      class-grade/ while the machine is warm) until it says done; its summary as $OUT/class.json
#   class-bg-N         the same class graded by one batch in its own process session (setsid), which outlives the
#                      command while the machine is warm: no grading is cut off at a call's end. Each call starts it
#                      (once) and waits for it up to CLASS_WAIT_S seconds (default 540); call it again within the
#                      machine's warm time until it says done. Its lock's hold log comes back as $OUT/class-holds.log
#   service-load       tools/service_load.py --device cuda: 20 students submit gelu at once through a real serve of
#                      6 workers, the first 3 graded alone too; $OUT/service-load gets its figures, the table and
#                      serve.log (the class and the gradebook stay in a work folder under /tmp)
#   profile-NAME       grade solutions/ for assignment NAME in this process under cProfile (a grading of one
#                      assignment runs in the grading process itself: its judging, its waits for the children),
#                      the top of the profile as $OUT/profile-NAME.txt; after a grading of NAME, it profiles a warm one
#   spy-NAME[+NAME...] grade solutions/ for those assignments (side by side) once to fill the caches, then again
#                      under py-spy (PYSPY=path, or a py_spy wheel in .gpu-carry/), every child sampled, waits
#                      included: $OUT/spy-NAME-....txt.gz ('+' made '-': the device tool sends back plain names) and
#                      tools/spy_summary.py's reading of the timing children
#   clock-ramp         tools/clock_ramp.py: how long the GPU takes to come up to speed after idling, and what the
#                      timing child's settle does then, as $OUT/clock-ramp.json
#   kept-transport     tools/kept_transport.py: 2.5 GB of kept outputs from a child to the parent through the channel's
#                      pipe and through the kept outputs' memory file, each way twice, as $OUT/kept-transport.json
#   with-VAR=VALUE     export VAR=VALUE for the steps after it (without-VAR: unset it), e.g. with-OMP_NUM_THREADS=1
#   sampler-on/-off    tools/load_sampler.py records the cores' and the GPU's load between the two, as $OUT/load.jsonl
#   keep-steady        every steady-grade/ grading's results.json, wall.json and began.json, as $OUT/steady-grade.tgz (for
#                      `tools/measurements.py phases`: the device sends back 8 files at most)
#   steady-compare     tools/steady_grade.py compare, its JSON kept as $OUT/steady.json (each grading's figures
#                      are also in $OUT/steady.jsonl as it ends: a command stopped at its limit keeps them)
# GRADER_GPU_LOCK_LOG=$OUT/holds.log in the environment: every hold of the GPU's lock as a line (gpu_lock.py),
# to see where the lock idled between timed phases.
# e.g. tools/gpu_session.sh grade-softmax "pytest tests/test_gpu.py -k 'bug_earns and gelu' -n 4"
# The sandbox needs bubblewrap: where the image lacks it, BWRAP_DEB=path/to/bubblewrap_*.deb (Debian's
# package, fetched elsewhere with `apt-get download bubblewrap`) is unpacked and put on the PATH.
# `batch` needs dask's distributed, which an image may lack: wheels in .whl/ (fetched elsewhere with
# `pip download`) are where the venv's set-up finds it, offline.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1
[ -d .whl ] && export PIP_FIND_LINKS="$PWD/.whl"
[ -e .venv/.ready ] || { python3 grader/bootstrap.py > "$OUT/bootstrap.log" 2>&1 && touch .venv/.ready; } ||
  tail "$OUT/bootstrap.log"
# A venv set up before the wheels came (a warm machine) gets dask's distributed now.
if [ -d .whl ] && [ -e .venv/.ready ] && ! .venv/bin/python -c "import distributed" 2>/dev/null; then
  .venv/bin/python -m pip install -q "dask[distributed]" >> "$OUT/bootstrap.log" 2>&1 || tail "$OUT/bootstrap.log"
fi
if ! command -v bwrap >/dev/null && [ -n "${BWRAP_DEB:-}" ]; then
  dpkg -x "$BWRAP_DEB" /tmp/bubblewrap && export PATH="/tmp/bubblewrap/usr/bin:$PATH"
fi
PY=$PWD/.venv/bin/python
$PY -c "from grader.running import sandbox, stack; print('sandbox:', sandbox.probe()); print('stack differs:', stack.differences('cuda'))"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
n=0
for step in "$@"; do
  n=$((n + 1))
  echo "=== $step ($(date -u +%H:%M:%S))"
  case $step in
    calibrate-*) $PY "tools/${step/-/_}.py" --json "$OUT/${step}.json" 2>&1 | tee "$OUT/${step}.log" ;;
    grade-all) $PY -m grader grade --submission solutions --device cuda \
               --json "$OUT/${step}.json" --html "$OUT/${step}.html" 2>&1 | tail -n 30 ;;
    grade-*) $PY -m grader grade --submission solutions --assignment "${step#grade-}" --device cuda \
               --json "$OUT/${step}.json" --html "$OUT/${step}.html" 2>&1 | tail -n 30 ;;
    "pytest "*) eval "$PY -m pytest -m gpu -q -p no:cacheprovider ${step#pytest }" 2>&1 | tee "$OUT/pytest-$n.log" |
                  grep -E "passed|failed|FAILED|ERROR|Error|assert" | tail -n 40 ;;
    "beside "*) mkdir -p steady-grade/beside
                $PY -m grader grade --submission solutions --device cuda --assignment gelu --assignment softmax \
                  --json steady-grade/beside/results.json --html steady-grade/beside/report.html > steady-grade/beside/grade.log 2>&1 &
                eval "$PY -m pytest -m gpu -q -p no:cacheprovider ${step#beside }" 2>&1 | tee "$OUT/beside-$n.log" |
                  grep -E "passed|failed|FAILED|ERROR|Error|assert" | tail -n 40
                wait; tail -n 3 steady-grade/beside/grade.log ;;
    steady-alone-*) runs=${step#steady-alone-}; first=1; [[ $runs == *-* ]] && { first=${runs#*-}; runs=${runs%-*}; }
                # STEADY_REPO=another checkout (a commit to compare with, in the same call): its own steady_grade.py
                # grades its own solutions/ with its own grader, into this checkout's steady-grade/.
                $PY "${STEADY_REPO:-.}/tools/steady_grade.py" alone --runs "$runs" --first "$first" --report "$OUT" \
                  --dir "$PWD/steady-grade" 2>&1 | tee -a "$OUT/steady.log" ;;
    steady-together) $PY tools/steady_grade.py together --rounds 3 --gradings 4 --assignment gelu --assignment softmax \
                       --busy 0.5 --report "$OUT" 2>&1 | tee -a "$OUT/steady.log" ;;
    steady-beside*) nice=${step#steady-beside}
                $PY tools/steady_grade.py beside --cold flash_attention --assignment gelu --assignment softmax \
                  ${nice:+--niceness ${nice#-}} --report "$OUT" 2>&1 | tee -a "$OUT/steady.log" ;;
    cold-*) cache=$(mktemp -d) && start=$(date +%s.%N) && out=$(realpath "$OUT") && name=$step${COLD_TAG:+-$COLD_TAG}
            # STEADY_REPO=another checkout: its grader grades its solutions/ (as steady-alone's does)
            (cd "${STEADY_REPO:-.}" && XDG_CACHE_HOME="$cache" $PY -m grader grade --submission solutions \
              --assignment "${step#cold-}" --device cuda --json "$out/$name.json" --html "$out/$name.html") 2>&1 |
              tail -n 30
            $PY -c "import json, sys, time; print(json.dumps({'seconds': time.time() - float(sys.argv[1])}))" "$start" \
              > "$OUT/$name.wall.json"
            echo "$name: $(cat "$OUT/$name.wall.json") of wall time"; rm -rf "$cache" ;;
    class-bg-*) if [ ! -e class-grade/started ]; then
                  mkdir -p class-grade && touch class-grade/started
                  GRADER_GPU_LOCK_LOG="$PWD/class-grade/holds.log" setsid bash -c "$PY tools/class_grade.py run \
                    --students ${step#class-bg-} --workers 6 --limit 1700 >> class-grade/run.log 2>&1; echo \$? > class-grade/ended" \
                    < /dev/null > /dev/null 2>&1 &
                fi
                waited=0
                while [ ! -e class-grade/ended ] && [ $waited -lt "${CLASS_WAIT_S:-540}" ]; do sleep 5; waited=$((waited + 5)); done
                if [ -e class-grade/ended ]; then echo "class: done (run's exit $(cat class-grade/ended))"; else echo "class: still grading"; fi
                tail -n 3 class-grade/run.log 2>/dev/null; cp class-grade/holds.log "$OUT/class-holds.log" 2>/dev/null
                $PY tools/class_grade.py summary --json "$OUT/class.json" 2>&1 | tee -a "$OUT/class.log" ;;
    class-*) $PY tools/class_grade.py run --students "${step#class-}" --workers 6 --limit 500 2>&1 | tee -a "$OUT/class.log"
             $PY tools/class_grade.py summary --json "$OUT/class.json" 2>&1 | tee -a "$OUT/class.log" ;;
    service-load) $PY tools/service_load.py --device cuda --assignment gelu --workers 6 --alone 3 \
                    --work /tmp/service-load-work --out "$OUT/service-load" 2>&1 | tee "$OUT/service-load.log" | tail -n 40 ;;
    profile-*) $PY -c "import cProfile, os, pstats, sys
from grader.cli import main
profile = cProfile.Profile()
profile.enable()
main(['grade', '--submission', 'solutions', '--assignment', sys.argv[1], '--device', 'cuda', '--json', os.devnull])
profile.disable()
with open(sys.argv[2], 'w') as out:
    pstats.Stats(profile, stream=out).sort_stats('cumtime').print_stats(80).sort_stats('tottime').print_stats(30)
os._exit(0)" "${step#profile-}" "$OUT/${step}.txt" > "$OUT/${step}.log" 2>&1; tail -n 3 "$OUT/${step}.log" ;;
    spy-*) names=${step#spy-}; tag=${step//+/-}; picks=(); for a in ${names//+/ }; do picks+=(--assignment "$a"); done
           spy=${PYSPY:-}
           if [ -z "$spy" ]; then
             $PY -m pip install -q --no-deps --target /tmp/py-spy .gpu-carry/py_spy-*.whl > /dev/null 2>&1; spy=/tmp/py-spy/bin/py-spy
           fi
           $PY -m grader grade --submission solutions "${picks[@]}" --device cuda --json "$OUT/$tag-first.json" \
             --html /dev/null > /dev/null 2>&1
           "$spy" record --subprocesses --idle --rate 250 --format raw -o "$OUT/$tag.txt" -- \
             $PY -m grader grade --submission solutions "${picks[@]}" --device cuda --json "$OUT/$tag.json" \
             --html /dev/null 2>&1 | tail -n 4
           $PY tools/spy_summary.py "$OUT/$tag.txt" | tee "$OUT/$tag.summary"; gzip -f "$OUT/$tag.txt" ;;
    clock-ramp) $PY tools/clock_ramp.py --json "$OUT/clock-ramp.json" 2>&1 | tail -n 8 ;;
    kept-transport) $PY tools/kept_transport.py --gib 2.5 --json "$OUT/kept-transport.json" 2>&1 | tail -n 12 ;;
    with-*=*) spec=${step#with-}; export "${spec%%=*}=${spec#*=}"; echo "$step" | tee -a "$OUT/steady.log" ;;
    without-*) unset "${step#without-}"; echo "$step" | tee -a "$OUT/steady.log" ;;
    sampler-on) $PY tools/load_sampler.py record --out "$OUT/load.jsonl" & echo $! > /tmp/load-sampler.pid ;;
    sampler-off) kill "$(cat /tmp/load-sampler.pid)" 2>/dev/null; sleep 0.3 ;;
    keep-steady) tar czf "$OUT/steady-grade.tgz" steady-grade/*/results.json steady-grade/*/wall.json steady-grade/*/began.json ;;
    steady-compare) $PY tools/steady_grade.py compare --json "$OUT/steady.json" 2>&1 | tee -a "$OUT/steady.log" ;;
    *) echo "unknown step: $step" ;;
  esac
done
echo "=== done ($(date -u +%H:%M:%S))"
