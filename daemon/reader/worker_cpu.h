/* Where a worker of squash-reader runs (serve_pool.c): on the reader's
 * own CPUs, or on the CPU of a scanner it follows.
 *
 * A scan (find, a stat walk, an import) is one thread sending a request as
 * soon as the previous one is answered. Answered from another CPU, every
 * request wakes a worker there and every answer wakes the scanner back:
 * two cross-CPU wake-ups per request (each a VM exit on a virtual
 * machine). So the worker that answered a scanner moves to the CPU the
 * scanner runs on and sleeps there: a request and its answer are then a
 * switch between two threads of one CPU. A scanner bound to one CPU, as
 * sites bind a job's tasks to cores, is followed to that CPU; one free to
 * move (or bound to several) to the CPU it last ran on, read again after
 * every answer, so the worker goes where the scheduler put the scanner.
 * Measured on 2 vCPUs: a bound hcp listing 1.66 s -> 1.20 s; a free stat
 * walk of 14,206 files 0.19 s -> 0.14 s, where the tree on local disk
 * takes 0.18 s (docs/performance.md, sections 13 and 25). A bound
 * scanner's reads are followed too: a small file's open, read and close
 * is one READ (section 14); a free one's are not, as it computes on its
 * CPU while readahead is decompressed on another. The scanner's placement
 * is only read, never changed. */
#ifndef SQUASH_READER_WORKER_CPU_H
#define SQUASH_READER_WORKER_CPU_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

/* The reader's own CPUs, where workers run when they follow nobody. */
struct worker_home {
	cpu_set_t cpus;
	bool known;
};

/* Takes the calling thread's CPUs as home. */
void worker_home_init(struct worker_home *h);

/* Makes threads started with attr start at home, not on the CPU of a
 * following worker that starts them. */
void worker_home_attr(const struct worker_home *h, pthread_attr_t *attr);

/* The CPU to answer the thread pid (a request header's) on: the one it is
 * bound to, else (unless bound_only) the one it last ran on
 * (/proc/PID/stat); -1 when pid is 0 or gone, or its CPU cannot be read. */
int requester_cpu(uint32_t pid, bool bound_only);

/* Moves the calling worker to cpu; *pinned says where it is (-1: home).
 * false when it cannot (a cpuset without that CPU). */
bool worker_follow(int cpu, int *pinned);

/* Back home, if it was away. */
void worker_go_home(const struct worker_home *h, int *pinned);

#endif
