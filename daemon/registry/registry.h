/* squashd's registry: the node-level mounts and the jobs that hold
 * references to them. In memory; state_file.c persists it. */
#ifndef SQUASHD_REGISTRY_H
#define SQUASHD_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "imagespec.h"
#include "squash.pb-c.h"

#define MOUNT_OWNER_ANY ((uid_t)-1)

struct fuse_keep;

/* What makes two requests share one mount: the same file content (device,
 * inode, size, mtime) in the same sharing domain (mode, and for FUSE the
 * user whose server reads it). */
struct mount_key {
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_sec;
	long mtime_nsec;
	Squash__MountMode mode;
	uid_t owner_uid; /* MOUNT_OWNER_ANY for kernel mounts */
};

enum mount_state {
	MOUNT_MOUNTING,   /* one request mounts it; others for the same key wait */
	MOUNT_READY,
	MOUNT_FAILED,     /* mounting failed: waiters take the reason; gone when unreferenced */
	MOUNT_DEAD,       /* its FUSE server died: never shared again; gone when unreferenced */
	MOUNT_UNMOUNTING, /* the last reference went; being torn down */
	MOUNT_LINGERING,  /* no job holds it; kept until linger_until_ms for the next job (linger.h) */
};

#define MOUNT_SESSION_UIDS 4

struct mount_entry {
	unsigned id;
	struct mount_key key;
	char *image;       /* path it was first requested by */
	char *mount_point; /* STATE_DIR/mnt/mID */
	pid_t server_pid;  /* FUSE server, 0 if none or gone */
	int server_pidfd;  /* -1 when none */
	struct fuse_keep *keep; /* FUSE connection kept to restart its server (mount/fuse_keep.h); NULL: none */
	char loop_device[32];
	unsigned refcount; /* job images holding it, pending ones included */
	enum mount_state state;
	char *failure;     /* MOUNT_FAILED: the reason; MOUNT_DEAD: how the server died */
	int failure_result; /* MOUNT_FAILED: enum result */
	long long linger_until_ms; /* MOUNT_LINGERING: monotonic expiry */
	struct mount_entry *teardown_next; /* on a teardown list */
	uid_t mounting_for; /* MOUNTING: the uid whose request makes it (core/loop_devices.h) */
	unsigned count_mark; /* scratch for counting distinct mounts under the lock */
	/* A kernel mount: the users whose squash-shell sessions held it (the
	 * first MOUNT_SESSION_UIDS), charged for its loop device if it stays
	 * attached after the unmount (core/pinned_loops.h). */
	uid_t session_uids[MOUNT_SESSION_UIDS];
	unsigned n_session_uids;
	char *state_extra; /* state file records of a newer squashd about it, kept as read (state_file.h) */
	struct mount_entry *next;
	/* A merged mount (core/merge.h; key.mode MODE_UNKNOWN): the image
	 * mounts it stacks, bottom first, each holding one reference of it. */
	struct mount_entry **lowers;
	size_t n_lowers;
	/* A union mount (core/union_mount.h; key.mode FUSE, key.owner_uid its
	 * user, the rest of the key 0): the images its reader merges, bottom
	 * first. n_parts 0 for any other mount. */
	struct mount_key *parts;
	size_t n_parts;
};

/* A merged mount (several images at one target) has this mode in its key. */
#define MOUNT_MODE_MERGED SQUASH__MOUNT_MODE__MODE_UNKNOWN

struct job_image {
	char *image;
	char *target;
	struct mount_entry *mount;
	bool writable;  /* ":rw" */
	char *overlay;  /* its overlay's mount point (overlay.h); NULL when none */
	char *upper;    /* ":rw=DIR": DIR (not kept in the state file); NULL when none */
	struct mount_entry *merged; /* its merge group's mount (core/merge.h); NULL when alone */
};

/* Who an entry's references belong to: the job (registry.jobs, its prolog
 * mounted them), or one of its steps or a squash-shell session
 * (registry.scoped, see core/holders.h). */
enum holder_kind { HOLDER_JOB = 0, HOLDER_STEP, HOLDER_SESSION };

struct job_entry {
	uint32_t job_id;
	uid_t uid;
	bool pending;          /* its mount request is still at work */
	bool settling;         /* pending, its mounts made: saved, waiting for the save (core/daemon.c) */
	bool ends_with_extern; /* released when its extern step ends
				* (core/job_end_watch.h) */
	Squash__Status status; /* OK, or why the prolog's request failed */
	char *message;
	char *overlay_dir; /* tmpfs holding the job's overlays (overlay.h); NULL when none */
	size_t count;
	struct job_image *images; /* count of them, room for cap (grown as added) */
	size_t cap;
	char *state_extra; /* state file records of a newer squashd about it, kept as read (state_file.h) */
	size_t state_bytes; /* its records' bytes in the state file (usage.h); 0: to be counted again */
	struct job_entry *next;
	/* Scoped entries only. */
	enum holder_kind kind;
	uint32_t step_id;                 /* HOLDER_STEP */
	pid_t session_pid;                /* HOLDER_SESSION: the squash-shell process */
	unsigned long long session_start; /* its start time (/proc/PID/stat field 22) */
};

struct registry {
	struct mount_entry *mounts;
	struct job_entry *jobs;
	struct job_entry *scoped; /* steps' and sessions' own images */
	unsigned next_mount_id;
	char *state_extra; /* state file records of a newer squashd about no entry, kept as read */
};

bool mount_key_equal(const struct mount_key *a, const struct mount_key *b);

/* A mount of one image that can be shared: MOUNTING, READY or LINGERING
 * with this key. */
struct mount_entry *registry_find_mount(struct registry *r, const struct mount_key *key);
/* Adds uid to m's session_uids when new and there is room (lock held). */
void mount_note_session_uid(struct mount_entry *m, uid_t uid);
struct mount_entry *registry_mount_by_id(struct registry *r, unsigned id);
/* A merged mount of exactly these lowers (bottom first) that can be
 * shared: MOUNTING, READY or LINGERING. */
struct mount_entry *registry_find_merged(struct registry *r, struct mount_entry *const *lowers,
					 size_t n);
/* A union mount of exactly these images (bottom first) for owner that
 * can be shared: MOUNTING, READY or LINGERING. */
struct mount_entry *registry_find_union(struct registry *r, uid_t owner,
					const struct mount_key *parts, size_t n);
/* Gives m (a union mount) its images' keys (copied). -1 when out of
 * memory. */
int registry_set_parts(struct mount_entry *m, const struct mount_key *parts, size_t n);
/* Gives m (a merged mount) its lowers (copied; their refcounts are NOT
 * changed). -1 when out of memory. */
int registry_set_lowers(struct mount_entry *m, struct mount_entry *const *lowers, size_t n);
/* Adds a mount (state MOUNTING, refcount 0, id from next_mount_id, mount
 * point mount_dir/mID); copies its strings. */
struct mount_entry *registry_new_mount(struct registry *r, const struct mount_key *key,
				       const char *image, const char *mount_dir);
/* Adds a mount read back from the state file (state READY, refcount 0). */
struct mount_entry *registry_add_mount(struct registry *r, const struct mount_key *key,
				       const char *image, const char *mount_point);
void registry_remove_mount(struct registry *r, struct mount_entry *m);

struct job_entry *registry_find_job(struct registry *r, uint32_t job_id);
struct job_entry *registry_add_job(struct registry *r, uint32_t job_id, uid_t uid);
/* Adds an image reference to job; the caller counts the reference in the
 * mount's refcount. */
int registry_job_add_image(struct job_entry *job, const char *image,
			   const char *target, struct mount_entry *m);
int registry_job_set_failure(struct job_entry *job, Squash__Status status,
			     const char *message);
/* Unlinks and frees the job; its mounts' refcounts are NOT changed. */
void registry_remove_job(struct registry *r, struct job_entry *job);

/* Steps' and sessions' entries (registry.scoped). */
struct job_entry *registry_find_step(struct registry *r, uint32_t job_id, uint32_t step_id);
struct job_entry *registry_find_session(struct registry *r, pid_t pid);
struct job_entry *registry_add_scoped(struct registry *r, enum holder_kind kind, uint32_t job_id,
				      uint32_t step_id, uid_t uid);
/* Unlinks and frees a scoped entry; its mounts' refcounts are NOT changed. */
void registry_remove_scoped(struct registry *r, struct job_entry *e);

/* Whether job uses mount m. */
/* The distinct mounts (an image's own or its merged tree) that counts
 * selects among those uid's jobs, steps and sessions hold, plus those in
 * MOUNTING made for uid (mounting_for). A mount shared with other users
 * counts for each of them. Lock held: it uses the mounts' count_mark. */
unsigned registry_user_mounts(struct registry *r, uid_t uid, bool (*counts)(const struct mount_entry *m));

bool registry_job_uses(const struct job_entry *job, const struct mount_entry *m);

/* The distinct key.owner_uid of the mounts picks selects, in no order
 * (for the per-user status rows): their count, the uids in *out (free
 * it); fewer when out of memory. */
size_t registry_mount_owners(const struct registry *r, bool (*picks)(const struct mount_entry *m),
			     uid_t **out);

void registry_free(struct registry *r);

/* A job's writable overlays as the registry records them (core/overlay.h
 * makes them): the path of overlay part kind ('o' the overlay's mount
 * point, 'u' its upper, 'w' its work directory) of image i in the job's
 * overlay directory dir (-1 when too long); the bit mask of images with an
 * overlay, and the reverse for the state file (fails on a bad record). */
int registry_overlay_path(char *buf, size_t len, const char *dir, char kind, size_t i);
unsigned registry_overlay_mask(const struct job_entry *job);
int registry_overlay_restore(struct job_entry *job, const char *dir, unsigned mask);

#endif
