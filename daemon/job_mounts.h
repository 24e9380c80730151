/* The daemon's operations on jobs and their node-level mounts: what each
 * request does to the registry and the mounts, and what it answers. */
#ifndef SQUASHD_JOB_MOUNTS_H
#define SQUASHD_JOB_MOUNTS_H

#include <sys/types.h>

#include "settings.h"
#include "peer.h"
#include "registry.h"
#include "squash.pb-c.h"

struct daemon_state {
	const struct squashd_config *cfg;
	struct registry registry;
	char state_path[PATH_MAX];
	char mount_dir[PATH_MAX];
};

/* A response and the arrays it owns; strings point into the registry. */
struct reply {
	Squash__Response resp;
	char message[SQUASH_PATH_MAX + 1024];
};

void reply_init(struct reply *r);
void reply_error(struct reply *r, Squash__Status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void reply_free(struct reply *r);

void job_mounts_mount(struct daemon_state *ds, const Squash__MountJobRequest *req, struct reply *out);
void job_mounts_release(struct daemon_state *ds, uint32_t job_id, struct reply *out);
void job_mounts_step_info(struct daemon_state *ds, const struct peer *peer, uint32_t job_id,
			  struct reply *out);
void job_mounts_list(struct daemon_state *ds, const struct peer *peer, struct reply *out);

/* A child exited: if it was a FUSE server, its mount is dead; log why. */
void job_mounts_child_exited(struct daemon_state *ds, pid_t pid, int wait_status);

/* After loading the state file: keep the mounts that are still mounted,
 * forget the rest, and unmount anything in the mount directory that the
 * registry does not know. */
void job_mounts_adopt(struct daemon_state *ds);

/* Writes the registry to the state file, logging failures. */
void job_mounts_save(struct daemon_state *ds);

#endif
