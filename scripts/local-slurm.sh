#!/usr/bin/env bash
# A real one-node Slurm cluster on localhost, for CI and tests.
#
# Usage: scripts/local-slurm.sh start|stop|status
#
#   start   install slurmctld/slurmd/munge if missing (apt-get), write the config, start the
#           daemons and wait until the node is up. The last line on stdout is
#           `export SLURM_CONF=<dir>/slurm.conf`, so callers can do
#               eval "$(scripts/local-slurm.sh start | tail -n 1)"
#           The same line is written to <dir>/env. Safe to run again while running.
#   stop    cancel all jobs and stop the daemons this script started. Fine if not running.
#   status  print sinfo; exit non-zero when the cluster is not up.
#
# Needs root on Debian/Ubuntu; works without systemd (daemons are started directly).
# Environment:
#   BATCHSPEC_SLURM_DIR      folder for config, state, logs, pid files (/tmp/batchspec-slurm)
#   BATCHSPEC_SLURM_TIMEOUT  seconds to wait for the node to come up (60)
#
# Everything except the final export line goes to stderr.
#
# The cluster: one node named `hostname -s`, partition "debug", Slurm 22.05 on Debian 12.
# No accounting, so sacct fails: poll with `scontrol show job -o <id>` (finished jobs stay
# there for an hour). A step `srun -n N` inside sbatch needs `sbatch -n N` (or more CPUs);
# else: "srun: error: Unable to create step for job ...: More processors requested than
# permitted".

set -euo pipefail

DIR="${BATCHSPEC_SLURM_DIR:-/tmp/batchspec-slurm}"
TIMEOUT="${BATCHSPEC_SLURM_TIMEOUT:-60}"
CONF="$DIR/slurm.conf"
NODE="$(hostname -s)"
PARTITION="debug"
MUNGED_PID_FILE="/run/munge/munged.pid"
# Present only when this script started munged, so `stop` leaves a system munged alone.
OUR_MUNGED="$DIR/munged.started-by-us"

# Our own config, not whatever the caller had (or /etc/slurm/slurm.conf).
export SLURM_CONF="$CONF"

log() { printf 'local-slurm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The pid in a pid file, or nothing (the daemons remove their file as they exit).
read_pid() {
    tr -dc '0-9' 2>/dev/null <"$1" || true
}

# True when process $1 is alive and its command is $2 (a recycled pid is not ours).
# /proc/PID/stat starts "PID (COMM) STATE". A zombie (Z) has exited already; without
# systemd, PID 1 may take seconds to reap the orphaned daemons.
proc_alive() {
    local stat
    [[ -n "$1" ]] || return 1
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    [[ "$stat" == "$1 ($2) "[!Z]* ]]
}

# True when the pid file names a live process whose command is $2.
pid_alive() {
    proc_alive "$(read_pid "$1")" "$2"
}

# Send TERM to the process in a pid file, wait up to 10 s, then KILL.
kill_pid_file() {
    local pid_file="$1" name="$2" pid i
    pid="$(read_pid "$pid_file")"
    if proc_alive "$pid" "$name"; then
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        # Wait on the process, not the file: the file goes away before the process does.
        for ((i = 0; i < 100; i++)); do
            proc_alive "$pid" "$name" || break
            sleep 0.1
        done
        if proc_alive "$pid" "$name"; then
            log "$name did not exit after 10 s, killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pid_file"
}

install_packages() {
    local missing=0 cmd
    for cmd in slurmctld slurmd sinfo sbatch munged munge; do
        command -v "$cmd" >/dev/null 2>&1 || missing=1
    done
    ((missing)) || return 0
    command -v apt-get >/dev/null 2>&1 || die "Slurm is not installed and apt-get is missing"
    log "installing slurmctld slurmd slurm-client munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >&2
}

start_munge() {
    # Already usable (a system munged, or ours from an earlier start)?
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0
    fi
    # The package creates the key; create one if it did not.
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        mungekey --create --keyfile=/etc/munge/munge.key >&2
    fi
    # munged refuses to start when these are not owned by munge with tight permissions.
    chown munge:munge /etc/munge /etc/munge/munge.key
    chmod 0700 /etc/munge
    chmod 0400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    install -d -o munge -g munge -m 0755 /run/munge
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged >&2
    touch "$OUR_MUNGED"
    local i
    for ((i = 0; i < 50; i++)); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "munged does not answer (munge -n | unmunge fails); see /var/log/munge/munged.log"
}

write_config() {
    local topology mem_kb real_mem
    # The node line must match the hardware exactly: giving only CPUs=N drains the node
    # ("reconfigured socket/core boundaries"). Take CPUs, Boards, SocketsPerBoard,
    # CoresPerSocket, ThreadsPerCore from the first line of `slurmd -C`.
    topology="$(slurmd -C 2>/dev/null | head -n 1 | tr ' ' '\n' \
        | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=' \
        | tr '\n' ' ')" || true
    [[ "$topology" == *CPUs=* ]] || die "could not read the node topology from 'slurmd -C'"
    # RealMemory above what slurmd sees drains the node; 80% of MemTotal leaves headroom.
    mem_kb="$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
    real_mem=$((mem_kb / 1024 * 80 / 100))

    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
    # Written to a temporary file first so a running slurmctld never reads half a file.
    cat >"$CONF.tmp" <<EOF
# Written by scripts/local-slurm.sh; one node on localhost.
ClusterName=batchspec
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
# No cgroups here (containers, no systemd).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# No slurmdbd: sacct does not work, poll with 'scontrol show job -o <id>'.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# Without these every job waits ~3 s before it is scheduled.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
# Keep finished jobs visible to scontrol for an hour.
MinJobAge=3600
KillWait=5
ReturnToService=2
MailProg=/bin/true
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
NodeName=$NODE NodeAddr=127.0.0.1 ${topology}RealMemory=$real_mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    mv -f "$CONF.tmp" "$CONF"
}

node_state() {
    sinfo -h -n "$NODE" -o '%T' 2>/dev/null | head -n 1
}

# When slurmd last registered with slurmctld, as 2024-01-31T12:00:00 (or "None").
slurmd_start_time() {
    scontrol show node -o "$NODE" 2>/dev/null | grep -o 'SlurmdStartTime=[^ ]*' | cut -d= -f2
}

# Wait until the node takes jobs; resume it if it comes up down or drained.
# $1: when slurmd was started by this call (empty if it was already running). A restarted
# slurmctld reports the node state it saved ("idle") before slurmd has registered again,
# so also wait until slurmd's registration is at least that recent.
wait_for_node() {
    local since="${1:-}" deadline state="" registered resumed=0
    deadline=$((SECONDS + TIMEOUT))
    while ((SECONDS < deadline)); do
        state="$(node_state)" || state=""
        case "$state" in
            idle | mixed | allocated | completing)
                registered="$(slurmd_start_time)" || registered=""
                # ISO timestamps compare correctly as strings.
                if [[ -z "$since" || ("$registered" != None && ! "$registered" < "$since") ]]; then
                    return 0
                fi
                ;;
            down | drained | draining | drain)
                # The trailing '*' (not responding) is absent, so slurmd is there:
                # clear a leftover down/drain from an earlier run.
                if ((resumed < 3)); then
                    log "node is $state, resuming it"
                    scontrol update NodeName="$NODE" State=RESUME >&2 || true
                    resumed=$((resumed + 1))
                fi
                ;;
        esac
        sleep 0.2
    done
    local daemon
    for daemon in slurmctld slurmd; do
        pid_alive "$DIR/$daemon.pid" "$daemon" || log "$daemon is not running"
    done
    log "sinfo -R:"
    sinfo -R >&2 || true
    log "last lines of $DIR/log/slurmctld.log:"
    tail -n 20 "$DIR/log/slurmctld.log" >&2 2>/dev/null || true
    log "last lines of $DIR/log/slurmd.log:"
    tail -n 20 "$DIR/log/slurmd.log" >&2 2>/dev/null || true
    die "node $NODE not up after ${TIMEOUT}s (last state: '${state:-no answer}')"
}

cmd_start() {
    local t0=$SECONDS
    # munge key ownership, /run/munge and the daemons all need root.
    [[ "$(id -u)" == 0 ]] || die "start needs root"
    install_packages
    mkdir -p "$DIR"
    start_munge
    if pid_alive "$DIR/slurmctld.pid" slurmctld; then
        log "slurmctld already running"
    else
        write_config
        log "starting slurmctld"
        slurmctld -f "$CONF" >&2
    fi
    local since=""
    if pid_alive "$DIR/slurmd.pid" slurmd; then
        log "slurmd already running"
    else
        log "starting slurmd"
        since="$(date +%Y-%m-%dT%H:%M:%S)"
        slurmd -f "$CONF" -N "$NODE" >&2
    fi
    wait_for_node "$since"
    log "node $NODE is $(node_state) ($((SECONDS - t0)) s)"
    local line
    line="$(printf 'export SLURM_CONF=%q' "$CONF")"
    printf '%s\n' "$line" >"$DIR/env"
    printf '%s\n' "$line"
}

cmd_stop() {
    if pid_alive "$DIR/slurmctld.pid" slurmctld; then
        local jobs i
        jobs="$(squeue -h -o '%A' 2>/dev/null || true)"
        if [[ -n "$jobs" ]]; then
            log "cancelling jobs: ${jobs//$'\n'/ }"
            # shellcheck disable=SC2086  # one argument per job id
            scancel $jobs >&2 || true
            # A cancelled job shows CANCELLED at once, but slurmd still has to end its
            # processes (slurmstepd outlives slurmd); the node leaves "allocated"/"completing"
            # when that is done.
            for ((i = 0; i < 50; i++)); do
                case "$(node_state)" in
                    allocated* | mixed* | completing*) sleep 0.2 ;;
                    *) break ;;
                esac
            done
        fi
    fi
    kill_pid_file "$DIR/slurmd.pid" slurmd
    kill_pid_file "$DIR/slurmctld.pid" slurmctld
    if [[ -e "$OUR_MUNGED" ]]; then
        kill_pid_file "$MUNGED_PID_FILE" munged
        rm -f "$OUR_MUNGED"
    fi
    log "stopped"
}

cmd_status() {
    [[ -f "$CONF" ]] || die "no config at $CONF (not started)"
    pid_alive "$DIR/slurmctld.pid" slurmctld || die "slurmctld is not running"
    pid_alive "$DIR/slurmd.pid" slurmd || die "slurmd is not running"
    sinfo
    case "$(node_state)" in
        idle | mixed | allocated | completing) ;;
        *) die "node $NODE is not up" ;;
    esac
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
