/* squashd's own configuration (/etc/squashd.conf): the node's policy. */
#ifndef SQUASHD_SETTINGS_H
#define SQUASHD_SETTINGS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "target.h"

#define SQUASHD_DEFAULT_CONFIG "/etc/squashd.conf"

enum mount_policy {
	MOUNT_POLICY_AUTO,   /* kernel for trusted images, FUSE for the rest */
	MOUNT_POLICY_FUSE,   /* FUSE for every image */
	MOUNT_POLICY_KERNEL, /* kernel for every image */
};

struct squashd_config {
	char socket_path[PATH_MAX];
	char state_dir[PATH_MAX];  /* registry file and mnt/ */
	char base_dir[PATH_MAX];   /* steps mount a tmpfs here */
	struct squash_prefixes allowed_targets;
	struct squash_prefixes trusted_prefixes;
	enum mount_policy mount_policy;
	bool require_munge;
	char munge_socket[PATH_MAX]; /* empty: libmunge's default */
	char squashfuse[PATH_MAX];
	unsigned max_images_per_job;
	unsigned request_timeout_s;
	unsigned gc_interval_s;      /* reconcile with Slurm this often; 0: only on demand */
	char slurm_conf[PATH_MAX];   /* empty: libslurm's default (SLURM_CONF or /etc/slurm) */
	char node_name[256];         /* this node's Slurm name; empty: short host name */
	unsigned max_loop_devices;   /* kernel mounts at once; 0: as many as the kernel gives */
	bool debug;                  /* log debug messages (also: squashd --debug) */
	unsigned linger_s;           /* keep an unused node-level mount this long; 0: unmount at once */
	unsigned long long overlay_size; /* bytes of a job's writable-overlay tmpfs per node; 0: no :rw */
};

#define SQUASHD_LINGER_MAX_S 3600
#define SQUASHD_OVERLAY_DEFAULT (1ULL << 30)
#define SQUASHD_OVERLAY_MAX (1ULL << 40)

/* Fills cfg with defaults, then reads path. Refuses a file that is not a
 * regular file owned by root or that group or others may write. A missing
 * file is an error only when must_exist. Returns 0 or -1 with err naming
 * the file and, for a bad line, its number. */
int config_load(const char *path, bool must_exist, struct squashd_config *cfg,
		char *err, size_t errlen);

void config_free(struct squashd_config *cfg);

const char *mount_policy_name(enum mount_policy p);

/* s without leading and trailing white space (in place): the parsing of
 * "key = value" lines, shared with the reload's change detection. */
char *config_trim(char *s);

#endif
