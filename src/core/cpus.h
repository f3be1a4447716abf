/* How many cores this process may use, and how much CPU it has used: the
 * autotuner's budget and its measure of CPU use. */
#ifndef PL_CPUS_H
#define PL_CPUS_H

/* Cores this process may run on: its affinity mask (sched_getaffinity),
 * lowered by a cgroup quota (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us /
 * cpu.cfs_period_us) rounded up to whole cores. At least 1. */
int pl_cpus_available(void);

/* The quota in `text` ("200000 100000", "max 100000" for cgroup v2; v1
 * passes quota and period as "QUOTA PERIOD" too) as cores, rounded up;
 * 0 for no limit or text that is not a quota. For tests. */
int pl_cpus_from_quota(const char *text);

/* CPU time of the whole process so far, all threads, in seconds. */
double pl_process_cpu_s(void);

#endif /* PL_CPUS_H */
