/* Where a worker of squash-reader --serve runs (serve_pool.c): on the
 * reader's own CPUs, or on the one CPU of a scanner it follows.
 *
 * A scan (find, ls -R, an import) bound to one CPU, as sites bind a job's
 * tasks to cores, gains little from a worker polling for its requests on
 * another CPU: the scanner is still woken there by every answer. So the
 * worker that watches such a scan moves to the scanner's CPU and sleeps
 * there: a request and its answer are then a switch between two threads
 * of one CPU. On a 2-vCPU machine a bound hcp listing took 1.20 s this
 * way, against 1.66 s polled from the other CPU (docs/performance.md,
 * section 13). Its reads are followed too: a bound md5sum of many small
 * files is a LOOKUP or a listing and a READ per file (section 14). A
 * scanner free to move is not followed: the scheduler moves it off the
 * CPU the worker keeps busy. The scanner's CPU is only read. */
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

/* The one CPU the thread pid (a request header's) is bound to, or -1
 * when it may run on several or is gone. */
int requester_bound_cpu(uint32_t pid);

/* Moves the calling worker to cpu; *pinned says where it is (-1: home).
 * false when it cannot (a cpuset without that CPU). */
bool worker_follow(int cpu, int *pinned);

/* Back home, if it was away. */
void worker_go_home(const struct worker_home *h, int *pinned);

#endif
