/* squashd's root object: the registry, the lock that guards it and the
 * daemon's counters, owned by the core (core/) and by nobody else.
 *
 * Many requests run at once, each in its own thread. The registry is
 * guarded by one mutex that is never held across slow work: opening an
 * image as the user, mounting, unmounting and asking Slurm all run
 * unlocked. A mount being made is in the registry as MOUNTING, so a second
 * request for the same image waits for it (on the condition variable)
 * instead of mounting twice. A release answers first and tears down the
 * mounts whose last reference went afterwards (struct teardown,
 * core/sharing.h). */
#ifndef SQUASHD_DAEMON_H
#define SQUASHD_DAEMON_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "registry/registry.h"
#include "registry/usage.h"
#include "settings/settings.h"
#include "squash.pb-c.h"

struct daemon_state {
	char state_path[PATH_MAX];
	char mount_dir[PATH_MAX];
	char sessions_dir[PATH_MAX]; /* squash-shell sessions' binds (core/sessions.c) */
	char node_name[256];
	long long started_ms;       /* monotonic */

	pthread_mutex_t lock;       /* guards everything below */
	pthread_cond_t changed;     /* a mount or job changed state; stopping */
	struct registry registry;
	bool stopping;
	char save_error[PATH_MAX + 256]; /* why the registry cannot be saved; "" when it can */
	char state_lost[3 * PATH_MAX]; /* why squashd started without its registry (new mounts are
					* refused); "" if it did not */
	char state_rebuilt[3 * PATH_MAX]; /* why it rebuilt its registry from the node at start
					   * (a damaged file, kept aside); "" if it did not */
	char roots_shared[PATH_MAX + 256]; /* why mnt/ or sessions/ cannot be a private mount
					    * (mount/private_roots.h); "" when they can */
	bool roots_deferred;        /* an older squashd's mounts below them: tried again */
	unsigned requests_in_progress;
	unsigned long long requests, requests_failed, gc_releases;
	long long last_gc_ms;       /* monotonic; 0: never */
	unsigned long long registry_save_errors; /* failed saves since start */
	/* Registry saves (group commit, daemon_save_grouped_locked): snapshots
	 * are numbered as they are taken; the highest one on disk, the highest
	 * one that failed, and whether one is being written unlocked. */
	unsigned long long save_taken, save_durable, save_failed;
	bool save_writing;
	pthread_cond_t saved;       /* a save finished */
	/* The saver thread copies the registry (registry/snapshot.h) when a
	 * save is wanted, then formats and writes the copy without the lock:
	 * saves asked for while it writes share its next copy, so however
	 * often a user's requests save, the registry is copied under the lock
	 * once per write. save_next_seq: the number promised to the savers
	 * waiting for the next copy (0: none). */
	unsigned long long save_next_seq;
	unsigned long long save_copies; /* copies the saver made (the tests) */
	pthread_cond_t save_wanted;
	pthread_t saver;
	bool saver_running, saver_exit;
	/* Writes of the file, in order (not under lock): the newest on disk. */
	pthread_mutex_t save_io;
	unsigned long long save_io_written;
	const char *fuse_reader;    /* what serves FUSE mounts (mount/fuse_reader.h); set at start */
	bool fuse_reader_resumes;   /* it can take over a dead one's connection (mount/fuse_keep.h) */
	bool fuse_reader_pools;     /* one process serves all of a user's mounts (mount/reader_pool.h) */
	bool fuse_reader_unions;    /* it serves several images as one mount (core/union_mount.h) */
};

/* What one operation lets go of, to be undone after its answer (unlocked):
 * mounts whose last reference went, jobs' overlay directories and ended
 * sessions' binds. It
 * carries the settings snapshot the operation holds (settings.h). */
struct teardown_dir {
	struct teardown_dir *next;
	/* Takes it down: a job's overlays (core/overlay.h) or an ended
	 * squash-shell session's binds (core/sessions.h). */
	void (*remove)(const char *path, int timeout_ms);
	char path[];
};
struct teardown {
	const struct squashd_config *cfg;
	struct mount_entry *head;   /* chained by teardown_next */
	struct teardown_dir *dirs;  /* torn down first (core/overlay.h) */
	/* Where the lowers a merged mount let go go (NULL: torn down by the
	 * same caller): a user's thread hands them to their owners' threads
	 * (core/owner_teardown.h). */
	void (*lowers_to)(struct daemon_state *ds, struct teardown *lowers);
	/* The user whose own request let these go (0: none, root's): what
	 * their teardown logs is on that user's budget, on whichever thread
	 * it runs (a kernel mount's, nobody's, included). */
	uint32_t log_peer;
};
#define TEARDOWN_INIT(settings) { .cfg = (settings), .head = NULL, .dirs = NULL, .lowers_to = NULL }

/* Takes down td's directories (lock not held), first to last, and frees
 * them; the mounts are core/sharing.h's. */
void teardown_dirs_run(struct teardown *td, int timeout_ms);

/* Paths below cfg->state_dir, the node name, locks. Returns 0 or -1. */
int daemon_init(struct daemon_state *ds, const struct squashd_config *cfg);

/* Reads the registry the last squashd saved (at start, before any other
 * thread). A file it cannot read is moved aside
 * (STATE_DIR/state.unreadable-TIME) for the admin and logged. When it is
 * of another format (written by a newer squashd: a downgrade), only that
 * squashd can know its mounts: state_lost is set, new mounts are refused
 * and the caller must leave the mount directory alone; a file of another
 * format kept aside earlier has the same effect until it is removed.
 * Otherwise (damaged: a disk error, a hand edit) the registry starts empty
 * and is rebuilt from the node as after a deleted file (state_rebuilt
 * says why; status and health show it): adoption detaches the mounts it
 * does not know from squashd's namespace, running jobs keep the copies
 * their steps hold (served until their last user goes) and the next jobs
 * get mounts of their own. */
void daemon_load(struct daemon_state *ds);

/* Writes the last snapshot, stops the saver and frees the registry (no
 * other thread uses it any more). */
void daemon_free(struct daemon_state *ds);

/* mnt/ and sessions/ as private mounts (mount/private_roots.h), at start
 * and from the gc timer while deferred (an older squashd's mounts still
 * below them, after an upgrade under running jobs). Not under the lock:
 * start, then the gc timer alone. */
void daemon_make_roots_private(struct daemon_state *ds);

/* Stopping: wakes every waiter; new requests are answered UNAVAILABLE. */
void daemon_stop(struct daemon_state *ds);

/* Saves the registry (lock held): takes a snapshot of it (a copy, no
 * formatting) for the saver thread, which writes the newest one without
 * the lock, in order. Returns -1 while saving fails (save_error says why:
 * health, new mounts refuse), else 0. */
int daemon_save_locked(struct daemon_state *ds);

/* The same as a group commit, for requests that answer many at once: the
 * lock is let go while the file is written and fsync'd, and one write
 * covers every change made until it starts, so a burst of requests pays
 * for a few writes instead of one each under the lock. Whatever the
 * caller holds in the registry must stay put meanwhile (a pending job
 * does: nobody else drops it). Returns 0 once a save that includes every
 * change made before the call is on disk, or -1 (as daemon_save_locked). */
int daemon_save_grouped_locked(struct daemon_state *ds);

/* Waits on ds->changed until deadline_ms (lock held); false on timeout or
 * stop. */
bool daemon_wait_locked(struct daemon_state *ds, long long deadline_ms);

/* Milliseconds until deadline_ms, 0 when past. */
int daemon_time_left(long long deadline_ms);

/* Whether new mounts are refused now (lock held): squashd stops
 * (UNAVAILABLE), its registry could not be read at start (NODE_ERROR: the
 * node's mounts are unknown), or the registry cannot be saved (NODE_ERROR;
 * a save is tried first): a mount this squashd could not record would be
 * leaked by the next one. Returns OK, or the status with why. */
Squash__Status daemon_refuse_new_mounts_locked(struct daemon_state *ds, char *why, size_t len);

#endif
