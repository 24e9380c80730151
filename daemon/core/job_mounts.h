/* The daemon's operations on jobs and their node-level mounts: what each
 * request does to the registry and the mounts, and what it answers.
 *
 * Many requests run at once, each in its own thread. The registry is
 * guarded by one mutex that is never held across slow work: opening an
 * image as the user, mounting, unmounting and asking Slurm all run
 * unlocked. A mount being made is in the registry as MOUNTING, so a second
 * request for the same image waits for it (on the condition variable)
 * instead of mounting twice. A release answers first and tears down the
 * mounts whose last reference went afterwards (job_mounts_teardown). */
#ifndef SQUASHD_JOB_MOUNTS_H
#define SQUASHD_JOB_MOUNTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "settings/settings.h"
#include "server/peer.h"
#include "registry/registry.h"
#include "util/result.h"
#include "squash.pb-c.h"

struct daemon_state {
	const struct squashd_config *cfg;
	char state_path[PATH_MAX];
	char mount_dir[PATH_MAX];
	char sessions_dir[PATH_MAX]; /* squash-shell sessions' binds (scoped_mounts.c) */
	char node_name[256];
	long long started_ms;       /* monotonic */

	pthread_mutex_t lock;       /* guards everything below */
	pthread_cond_t changed;     /* a mount or job changed state; stopping */
	struct registry registry;
	bool stopping;
	char save_error[PATH_MAX + 256]; /* why the registry cannot be saved; "" when it can */
	char state_lost[PATH_MAX + 256]; /* why squashd started without its registry; "" if it did not */
	unsigned requests_in_progress;
	unsigned long long requests, requests_failed, gc_releases;
	long long last_gc_ms;       /* monotonic; 0: never */
	unsigned long long registry_save_errors; /* failed saves since start */
	const char *fuse_reader;    /* what serves FUSE mounts (fuse_reader.h); set at start */
};

/* Mounts whose last reference went, to be unmounted after the answer. */
struct teardown {
	struct mount_entry *head;
	struct teardown_dir *dirs; /* jobs' overlay directories, torn down first (overlay.h) */
};

struct teardown_dir {
	struct teardown_dir *next;
	char path[];
};

/* A response and the arrays it owns; strings point into the registry or
 * into the reply itself. */
struct reply {
	Squash__Response resp;
	char message[SQUASH_PATH_MAX + 1024];
	Squash__NodeStatus node;
	char *problems[8];
	char problem_text[8][PATH_MAX + 256];
	struct status_extra *extra;  /* status: the operations view (status_report.h) */
	char session_dir[PATH_MAX]; /* session_mount's answer */
};

void reply_init(struct reply *r);
void reply_error(struct reply *r, Squash__Status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void reply_free(struct reply *r);

int job_mounts_init(struct daemon_state *ds, const struct squashd_config *cfg);

/* Each request gives up waiting at deadline_ms (monotonic). */
void job_mounts_mount(struct daemon_state *ds, const Squash__MountJobRequest *req,
		      struct reply *out, struct teardown *td, long long deadline_ms);
void job_mounts_release(struct daemon_state *ds, uint32_t job_id, struct reply *out,
			struct teardown *td, long long deadline_ms);
void job_mounts_step_info(struct daemon_state *ds, const struct peer *peer, uint32_t job_id,
			  struct reply *out, long long deadline_ms);
void job_mounts_list(struct daemon_state *ds, const struct peer *peer, struct reply *out);
void job_mounts_status(struct daemon_state *ds, struct reply *out);

/* Releases a job that gc found gone, as its epilog would have. Returns true
 * when the job was there and released. */
bool job_mounts_release_gone(struct daemon_state *ds, uint32_t job_id, struct teardown *td);

/* Unmounts what td holds (unlocked) and forgets it. */
void job_mounts_teardown(struct daemon_state *ds, struct teardown *td);

/* After loading the state file: keep the mounts that are still mounted and
 * served, forget the rest, and unmount anything in the mount directory that
 * the registry does not know. */
void job_mounts_adopt(struct daemon_state *ds);

/* Saves the registry; on failure remembers why (health, new mounts refuse)
 * and returns -1. Call with ds->lock held. */
int job_mounts_save_locked(struct daemon_state *ds);

/* For jobs and scoped_mounts.c (steps' and sessions' own images), with the
 * same sharing and policy: mounts or shares one image for id and records
 * it in e, which is pending (unlocked; on failure err says why and e is
 * unchanged); drops a reference (lock held); waits on ds->changed (lock
 * held; false on timeout or stop). */
struct identity;
enum result job_mounts_add_image(struct daemon_state *ds, const struct identity *id,
				 struct job_entry *e, const Squash__ImageSpec *spec,
				 char *err, size_t errlen, long long deadline_ms);
void job_mounts_put(struct daemon_state *ds, struct mount_entry *m, struct teardown *td);
bool job_mounts_wait(struct daemon_state *ds, long long deadline_ms);

/* Stopping: wakes every waiter; new requests are answered UNAVAILABLE. */
void job_mounts_stop(struct daemon_state *ds);

#endif
