#!/usr/bin/env bash
# Start a real single-node SLURM cluster with job accounting on this machine, for checking
# profiles/slurm (snakemake-executor-plugin-slurm polls `sacct`, so accounting is required:
# slurmctld -> slurmdbd -> MariaDB). Debian's packages: munge, slurm-wlm (slurmctld, slurmd,
# slurm-client), slurmdbd, mariadb-server. Idempotent: installs what is missing, writes the
# configs, starts only daemons that are not running, registers cluster/account/user once.
# Needs root. No systemd: the daemons are started directly and daemonise themselves.
#
#   sudo bash bench/slurm/start_cluster.sh      # then: sinfo, sbatch, sacct ...
#   sudo bash bench/slurm/stop_cluster.sh
#
# Names (environment overrides): cluster $SLURM_CHECK_CLUSTER (mastif), account
# $SLURM_CHECK_ACCOUNT (mastif), partition `cpu`. The DB password only guards a MariaDB
# that listens on loopback; it is not a secret. slurmd runs at nice $SLURM_CHECK_NICE
# (10) and its jobs inherit it (PropagatePrioProcess=0), so a check run yields the CPU to
# whatever else this machine is doing.
set -euo pipefail

log() { printf '[start_cluster] %s\n' "$*"; }
die() { printf '[start_cluster] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"

CLUSTER=${SLURM_CHECK_CLUSTER:-mastif}
ACCOUNT=${SLURM_CHECK_ACCOUNT:-mastif}
PARTITION=cpu
DB_NAME=slurm_acct_db
DB_USER=slurm
DB_PASS=${SLURM_CHECK_DB_PASS:-mastif-slurmdbd-loopback}
NICE=${SLURM_CHECK_NICE:-10}
HOST=$(hostname -s)
ETC=/etc/slurm
RUN=/run/slurm
LOGDIR=/var/log/slurm
SPOOL=/var/lib/slurm

# --- 1. packages ------------------------------------------------------------------------
PKGS=(munge slurm-wlm slurmctld slurmd slurm-client slurmdbd mariadb-server mariadb-client)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  # keep the packages' maintainer scripts from starting daemons before the configs exist
  POLICY=/usr/sbin/policy-rc.d
  made_policy=0
  if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY"
    chmod 755 "$POLICY"
    made_policy=1
  fi
  trap '[ "$made_policy" = 1 ] && rm -f "$POLICY"' EXIT
  apt-get update -qq -o DPkg::Lock::Timeout=600
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
    "${missing[@]}" >/dev/null
  [ "$made_policy" = 1 ] && rm -f "$POLICY"
  trap - EXIT
else
  log "packages already installed"
fi
log "$(slurmctld -V) / munge $(dpkg-query -W -f='${Version}' munge) / mariadb $(dpkg-query -W -f='${Version}' mariadb-server)"

id slurm >/dev/null 2>&1 || die "no 'slurm' user (the Debian slurm packages create it)"
install -d -o slurm -g slurm -m 755 "$RUN" "$LOGDIR" "$SPOOL" "$SPOOL/slurmctld"
install -d -o root -g root -m 755 "$SPOOL/slurmd"

# --- 2. munge ---------------------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
  log "creating munge key"
  mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
install -d -o munge -g munge -m 755 /run/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "munged already running"
else
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.5; done
  munge -n | unmunge >/dev/null || die "munge does not work"
fi

# --- 3. MariaDB + accounting database ---------------------------------------------------
# slurmdbd's recommended InnoDB settings (it logs an error below 512M of buffer pool);
# applied when MariaDB (re)starts
cat >/etc/mysql/mariadb.conf.d/60-slurmdbd.cnf <<'EOF'
# written by bench/slurm/start_cluster.sh: settings slurmdbd asks for
[mysqld]
bind-address = 127.0.0.1
innodb_buffer_pool_size = 512M
innodb_log_file_size = 64M
innodb_lock_wait_timeout = 900
EOF
install -d -o mysql -g mysql -m 755 /run/mysqld
if [ ! -d /var/lib/mysql/mysql ]; then
  log "initialising the MariaDB data directory"
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
fi
if mariadb-admin ping --silent >/dev/null 2>&1; then
  log "MariaDB already running"
else
  log "starting MariaDB"
  # mysqld_safe stays in the foreground: run it detached, in its own session
  setsid mysqld_safe --user=mysql >/dev/null 2>&1 </dev/null &
  for _ in $(seq 60); do mariadb-admin ping --silent >/dev/null 2>&1 && break; sleep 1; done
  mariadb-admin ping --silent >/dev/null 2>&1 || die "MariaDB did not start (run mysqld_safe --user=mysql in the foreground to see why)"
fi
mariadb <<EOF
CREATE DATABASE IF NOT EXISTS ${DB_NAME};
CREATE USER IF NOT EXISTS '${DB_USER}'@'localhost' IDENTIFIED BY '${DB_PASS}';
ALTER USER '${DB_USER}'@'localhost' IDENTIFIED BY '${DB_PASS}';
GRANT ALL PRIVILEGES ON ${DB_NAME}.* TO '${DB_USER}'@'localhost';
FLUSH PRIVILEGES;
EOF
log "database ${DB_NAME} and user ${DB_USER}@localhost ready"

# --- 4. configs -------------------------------------------------------------------------
mkdir -p "$ETC"
# what slurmd sees on this machine (CPUs, sockets, cores, threads, memory)
NODE_LINE=$(slurmd -C | head -n 1)
REAL_MEM=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$NODE_LINE")
# leave 1 GiB to the OS and the daemons, so jobs cannot take the machine's last MiB
NODE_MEM=$((REAL_MEM - 1024))
NODE_LINE=$(sed "s/RealMemory=[0-9]*/RealMemory=${NODE_MEM}/; s/NodeName=[^ ]*/NodeName=${HOST}/" <<<"$NODE_LINE")

new_dbd=$(mktemp)
cat >"$new_dbd" <<EOF
# written by bench/slurm/start_cluster.sh
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=slurm
DebugLevel=info
LogFile=${LOGDIR}/slurmdbd.log
PidFile=${RUN}/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageUser=${DB_USER}
StoragePass=${DB_PASS}
StorageLoc=${DB_NAME}
EOF

new_conf=$(mktemp)
cat >"$new_conf" <<EOF
# written by bench/slurm/start_cluster.sh: one node, accounting through slurmdbd
ClusterName=${CLUSTER}
SlurmctldHost=${HOST}
SlurmUser=slurm
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
StateSaveLocation=${SPOOL}/slurmctld
SlurmdSpoolDir=${SPOOL}/slurmd
SlurmctldPidFile=${RUN}/slurmctld.pid
SlurmdPidFile=${RUN}/slurmd.pid
SlurmctldLogFile=${LOGDIR}/slurmctld.log
SlurmdLogFile=${LOGDIR}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups in this container: track processes through /proc, bind no tasks
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# accounting: sacct (which the Snakemake plugin polls) needs slurmdbd
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageEnforce=associations
# keep sbatch --comment (the plugin puts rule and wildcards there) in the database
AccountingStoreFlags=job_comment
# sample every 5 s, so sacct's MaxRSS/TotalCPU cover short jobs too (Debian's 30 s misses them)
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
JobCompType=jobcomp/none
SlurmctldTimeout=120
SlurmdTimeout=300
InactiveLimit=0
MinJobAge=300
KillWait=30
Waittime=0
# jobs keep slurmd's nice value
PropagatePrioProcess=0
${NODE_LINE} State=UNKNOWN
PartitionName=${PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

changed=0
if ! cmp -s "$new_dbd" "$ETC/slurmdbd.conf"; then mv "$new_dbd" "$ETC/slurmdbd.conf"; changed=1; else rm -f "$new_dbd"; fi
if ! cmp -s "$new_conf" "$ETC/slurm.conf"; then mv "$new_conf" "$ETC/slurm.conf"; changed=1; else rm -f "$new_conf"; fi
chown slurm:slurm "$ETC/slurmdbd.conf"
chmod 600 "$ETC/slurmdbd.conf"
chmod 644 "$ETC/slurm.conf"
log "configs: $ETC/slurm.conf, $ETC/slurmdbd.conf (changed=$changed)"
log "node: ${NODE_LINE}"

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# --- 5. slurmdbd ------------------------------------------------------------------------
if pid_alive "$RUN/slurmdbd.pid"; then
  log "slurmdbd already running (pid $(cat "$RUN/slurmdbd.pid"))"
else
  log "starting slurmdbd"
  /usr/sbin/slurmdbd
fi
for _ in $(seq 60); do
  sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1 && break
  sleep 1
done
sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1 \
  || die "slurmdbd does not answer (see $LOGDIR/slurmdbd.log)"

# --- 6. cluster, account, user (before slurmctld, which then registers at once) -----------
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
  log "registering cluster $CLUSTER"
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi
if ! sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT"; then
  log "adding account $ACCOUNT"
  sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="mastif SLURM check" \
    Organization=mastif >/dev/null
fi
add_user() {
  local u=$1
  if ! sacctmgr -n -P list assoc user="$u" account="$ACCOUNT" cluster="$CLUSTER" format=user | grep -qx "$u"; then
    log "adding user $u to account $ACCOUNT"
    sacctmgr -i add user "$u" Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
  fi
  sacctmgr -i modify user where name="$u" set DefaultAccount="$ACCOUNT" >/dev/null 2>&1 || true
}
add_user root
# the user who called sudo, if any, can submit too
if [ -n "${SUDO_USER:-}" ] && [ "${SUDO_USER}" != root ]; then add_user "$SUDO_USER"; fi

# --- 7. slurmctld, slurmd ---------------------------------------------------------------
if pid_alive "$RUN/slurmctld.pid"; then
  if [ "$changed" = 1 ]; then log "reconfiguring slurmctld"; scontrol reconfigure || true; fi
  log "slurmctld already running (pid $(cat "$RUN/slurmctld.pid"))"
else
  log "starting slurmctld"
  /usr/sbin/slurmctld
fi
for _ in $(seq 30); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 1; done
scontrol ping | grep -q UP || die "slurmctld is not up (see $LOGDIR/slurmctld.log)"

if pid_alive "$RUN/slurmd.pid"; then
  log "slurmd already running (pid $(cat "$RUN/slurmd.pid"))"
else
  log "starting slurmd (nice $NICE)"
  nice -n "$NICE" /usr/sbin/slurmd
fi

# --- 8. wait for an idle node and a sacct that answers ----------------------------------
state=""
for i in $(seq 60); do
  state=$(sinfo -h -N -n "$HOST" -o '%t' 2>/dev/null | head -n 1)
  case "$state" in
    idle|mix|alloc) break ;;
    down*|drain*|drng*)
      # left over from an earlier start (e.g. a reboot): bring it back
      [ "$i" -gt 5 ] && scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
  esac
  sleep 1
done
case "$state" in
  idle|mix|alloc) ;;
  *) sinfo -R; die "node $HOST is '$state', not idle (see $LOGDIR/slurmd.log, slurmctld.log)" ;;
esac
sacct -a -X -n --starttime now-1hours >/dev/null || die "sacct does not answer"

log "daemons:"
ps -o pid,user,etime,args -C munged,mariadbd,slurmdbd,slurmctld,slurmd | sed 's/^/    /'
log "sinfo:"
sinfo | sed 's/^/    /'
log "associations:"
sacctmgr -n -P list assoc cluster="$CLUSTER" format=cluster,account,user | sed 's/^/    /'
log "cluster $CLUSTER is up: partition $PARTITION, account $ACCOUNT"
