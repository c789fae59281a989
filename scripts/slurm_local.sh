#!/usr/bin/env bash
# A single-node SLURM on this (Debian) machine, for tests/slurm/: munge + slurmctld + slurmd, started
# directly (no systemd), a localhost slurm.conf with no cgroups and no accounting. Run as root:
#
#     sudo scripts/slurm_local.sh            # install if needed, configure, start, check
#     sudo scripts/slurm_local.sh stop       # stop the three daemons
#
# Then: LRA_SLURM_TESTS=1 python -m pytest -q -n 0 tests/slurm
set -euo pipefail

STATE=${SLURM_LOCAL_STATE:-/var/spool/slurm-local}
CONF=/etc/slurm/slurm.conf
HOST=$(hostname -s)

stop() {
    for d in slurmd slurmctld munged; do
        if [ -f "$STATE/$d.pid" ] && kill -0 "$(cat "$STATE/$d.pid")" 2>/dev/null; then
            kill "$(cat "$STATE/$d.pid")"
        fi
    done
}
if [ "${1:-}" = stop ]; then stop; exit 0; fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get install --dry-run -y slurm-wlm munge >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge
fi

# munge: a key, and its run/log directories owned by the munge user.
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0400 /etc/munge/munge.key
mkdir -p "$STATE"/{ctld,d}
if ! pgrep -u munge -x munged >/dev/null; then
    sudo -u munge /usr/sbin/munged --pid-file=/run/munge/munged.pid 2>/dev/null \
        || runuser -u munge -- /usr/sbin/munged
    cp /run/munge/munged.pid "$STATE/munged.pid" 2>/dev/null || true
fi
munge -n | unmunge >/dev/null

# The node as slurmd sees it (CPUs, memory), less a little memory for the system.
CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /etc/slurm
cat > "$CONF" <<EOF
ClusterName=lralocal
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=30
Waittime=0
JobRequeue=1
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
# slurmd 22.05 loads a cgroup plugin even with proctrack/linuxproc and task/none; nothing uses it.
[ -f /etc/slurm/cgroup.conf ] || printf "CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n" > /etc/slurm/cgroup.conf

pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 30); do
    sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break
    sleep 1
done
sinfo
srun -N1 -n1 hostname
