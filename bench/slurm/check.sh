#!/usr/bin/env bash
# Check profiles/slurm against a real SLURM cluster on this machine: starts the single-node
# cluster with accounting (bench/slurm/start_cluster.sh), copies the work tree to a temp
# directory (without .git, .venv, .envs, results, logs, .snakemake), builds the experiment's
# framework environments in it (mastif envs build), runs the whole tiny
# experiment there through snakemake-executor-plugin-slurm, then prints sacct for the jobs,
# which outputs exist and the run's outcome. Needs root (for the cluster) and the project's
# venv with the plugin:
#
#   .venv/bin/pip install -e '.[slurm]'   # snakemake-executor-plugin-slurm
#   sudo bash bench/slurm/check.sh            # CHECK_TIMEOUT=3600 (seconds) by default
#   CHECK_EXTRA_ARGS="--workflow-profile none" sudo -E bash bench/slurm/check.sh
#
# Note: Snakemake also loads profiles/default as the *workflow* profile on top of
# --profile profiles/slurm, and its top-level keys win (the run's "Using profiles" and
# "Provided resources" lines below show what was in force); CHECK_EXTRA_ARGS passes extra
# snakemake arguments such as --workflow-profile none.
#
# Exit code: snakemake's (124/130 when the time limit stopped it). The temp directory
# (printed) keeps the run's logs: logs/, .snakemake/slurm_logs/, snakemake.out.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${MASTIF_VENV:-$REPO/.venv}
CONFIG=${CHECK_CONFIG:-bench/slurm/tiny.yaml}
TIMEOUT=${CHECK_TIMEOUT:-3600}
T0=$(date +%s)
START=$(date +%Y-%m-%dT%H:%M:%S)

say() { printf '\n=== %s\n' "$*"; }

say "cluster"
bash "$REPO/bench/slurm/start_cluster.sh" || { echo "start_cluster.sh failed"; exit 1; }

say "tools"
"$VENV/bin/snakemake" --version | sed 's/^/snakemake /'
if ! "$VENV/bin/python" -c "import snakemake_executor_plugin_slurm" 2>/dev/null; then
  echo "snakemake-executor-plugin-slurm is not installed in $VENV:"
  echo "  $VENV/bin/pip install -e '$REPO[slurm]'"
  exit 1
fi
"$VENV/bin/python" -m pip list 2>/dev/null | grep -i "snakemake-executor-plugin" | sed 's/^/  /'
sinfo --version

WORK=$(mktemp -d /tmp/mastif-slurm-check.XXXXXX)
say "work tree copy: $WORK"
rsync -a --exclude=/.git --exclude=/.venv --exclude=/.envs --exclude=/results --exclude=/logs \
  --exclude=/.snakemake --exclude=__pycache__ --exclude=.pytest_cache --exclude=.ruff_cache \
  --exclude='*.egg-info' "$REPO/" "$WORK/"
cd "$WORK" || exit 1
# the copy's own package, not the venv's editable install of $REPO/src; the venv's
# binaries (snakemake in each job is the venv's python, passed on by sbatch --export=ALL)
export PYTHONPATH="$WORK/src${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$VENV/bin:$PATH"

say "validate"
"$VENV/bin/mastif" validate "$CONFIG" || exit 1

# the experiment's framework environments, built here before anything is submitted (a
# cluster's nodes need no network then); the workflow's framework_env jobs find them current
say "framework environments (mastif envs build --configfile $CONFIG)"
"$VENV/bin/python" -m mastif.cli envs build --configfile "$CONFIG" || exit 1
# shellcheck disable=SC2086
"$VENV/bin/snakemake" -n -q --profile profiles/slurm --configfile "$CONFIG" ${CHECK_EXTRA_ARGS:-} 2>&1 | tail -n 25

say "snakemake --profile profiles/slurm --configfile $CONFIG (limit ${TIMEOUT}s)"
# first status check after 10 s instead of 40 (a tiny DAG of short jobs); keep the SLURM
# logs of successful jobs too, for this report
SMK=(
  "$VENV/bin/snakemake" --profile profiles/slurm --configfile "$CONFIG"
  --slurm-init-seconds-before-status-checks 10
  --slurm-keep-successful-logs
)
# shellcheck disable=SC2206
[ -n "${CHECK_EXTRA_ARGS:-}" ] && SMK+=(${CHECK_EXTRA_ARGS})
echo "${SMK[*]}"
T1=$(date +%s)
# SIGINT on time-out: snakemake then cancels the SLURM jobs it submitted
timeout -s INT -k 120 "$TIMEOUT" "${SMK[@]}" >snakemake.out 2>&1
rc=$?
T2=$(date +%s)
echo "snakemake exit code: $rc after $((T2 - T1)) s (full output: $WORK/snakemake.out)"

# anything of this run still queued (a killed snakemake does not cancel): cancel by workdir
left=$(squeue -h -o '%i %Z' 2>/dev/null | awk -v w="$WORK" '$2 == w {print $1}' | tr '\n' ' ')
if [ -n "${left// /}" ]; then
  echo "cancelling leftover jobs: $left"
  # shellcheck disable=SC2086
  scancel $left
fi

say "snakemake: submissions, errors and summary"
grep -E "Using profile|Provided |SLURM run ID|submitted with SLURM jobid|Guessed SLURM|SLURM account|Error|error:|WorkflowError|Exception|Finished job|steps \([0-9]+%\) done|Complete log" snakemake.out \
  | sed -E 's/^/  /' | tail -n 80
echo "  ..."
tail -n 15 snakemake.out | sed 's/^/  | /'

say "sinfo"
sinfo

say "sacct (jobs of this check)"
jobids=$(sed -nE 's/.*submitted with SLURM jobid ([0-9]+).*/\1/p' snakemake.out | sort -n | paste -sd, -)
if [ -n "$jobids" ]; then
  sacct -j "$jobids" -X --format=JobID,Comment%50,State,ExitCode,Elapsed,Timelimit,AllocCPUS,ReqMem,Account%8
  echo
  echo "job steps (what each used: .batch is the plugin's snakemake, .0 the rule under srun):"
  sacct -j "$jobids" --format=JobID%10,JobName%10,State,Elapsed,TotalCPU,MaxRSS,MaxVMSize \
    | awk 'NR <= 2 || $1 !~ /\.extern$/ && $1 ~ /\./'
else
  echo "no job was submitted; sacct since $START:"
  sacct -a -X --starttime "$START" --format=JobID,JobName%40,Comment%42,State,ExitCode,Elapsed
fi

say "outputs"
for f in results/tasks.parquet results/runs results/judged results/values results/metrics results/stats results/plots results/tables; do
  if [ -e "$f" ]; then
    n=$(find "$f" -type f | wc -l)
    echo "  present  $f ($n file(s))"
  else
    echo "  MISSING  $f"
  fi
done
runs=$(find results/runs -name '*.parquet' 2>/dev/null)
if [ -n "$runs" ]; then
  for r in $runs; do
    echo "  $r:"
    "$VENV/bin/mastif" runs "$r" 2>&1 | sed 's/^/    /'
  done
else
  echo "  no results/runs/**/*.parquet"
fi
remaining=$("$VENV/bin/snakemake" -n -q --configfile "$CONFIG" 2>&1 | tail -n 20)
if grep -q "Nothing to be done" <<<"$remaining" || [ -z "$remaining" ]; then
  echo "  DAG complete: snakemake -n has nothing left to do"
else
  echo "  DAG not complete; snakemake -n still lists:"
  sed 's/^/    /' <<<"$remaining"
fi

if [ "$rc" != 0 ]; then
  say "logs of failed jobs"
  grep -E "Error in rule|log:|jobid" snakemake.out | sed 's/^/  /' | head -n 40
  for f in $(grep -ohE "/[^ ]*slurm_logs/[^ )]*\.log" snakemake.out | sort -u); do
    if [ -f "$f" ] && grep -qiE "error|exception|traceback" "$f"; then
      echo "--- $f (last 30 lines)"
      tail -n 30 "$f"
    fi
  done
fi

say "done: exit code $rc, total $(( $(date +%s) - T0 )) s, work tree $WORK"
exit "$rc"
