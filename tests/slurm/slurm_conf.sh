# shellcheck shell=bash
# The slurm.conf settings both test clusters share (tests/slurm/cluster.sh: one node on loopback;
# tests/cluster/cluster.sh: several nodes in network namespaces). Sourced by them.
#   slurm_conf_settings DIR TMPFS SLURMD   the settings for daemons whose files live under DIR: TMPFS is the
#                                          nodes' local scratch (Slurm's TmpFS), SLURMD the name of slurmd's pid
#                                          and log files (`slurmd`, or `slurmd.%n`: one per node name)
slurm_conf_settings() {
  local dir=$1 tmpfs=$2 slurmd=$3
  cat <<EOF
MailProg=/bin/true
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket.2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
TmpFS=$tmpfs
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/$slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/$slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# Open MPI from Debian wires up through PMIx under srun (pmi2 does not work with it).
MpiDefault=pmix
# No cgroups needed: track job processes through /proc, bind with sched_setaffinity.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
PropagateResourceLimits=NONE
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1,batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Trust the node lines even where slurmd detects a different layout (CI runners, containers).
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
# Short timers: finished jobs stay visible to scontrol for MinJobAge seconds (there is no accounting).
KillWait=5
MinJobAge=600
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
Waittime=0
UnkillableStepTimeout=30
# 8 GPUs per node that exist only as a count, so that jobs/gpu_node.sbatch and multinode_ib.sbatch can be
# submitted.
GresTypes=gpu
EOF
}
