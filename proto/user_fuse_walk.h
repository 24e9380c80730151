/* Opening a user's path without asking a user's FUSE server anything.
 *
 * open(2) of a path looks each component up in the file system it is on;
 * where that is a FUSE mount of a user's (user_fuse.h), the lookup waits
 * for that user's server, and once the server has read the request and
 * sits on it not even SIGKILL ends the wait. squashd's opener child
 * (daemon/mount/image_open.c) would stay behind in squashd's own cgroup,
 * one per request: a user could fill squashd's task limit. So the path
 * is walked one component at a time: each mount the walk enters is judged
 * from its mount id and mountinfo (the kernel gives both without asking a
 * file system) before anything is looked up in it, and symbolic links on
 * the way are read and followed by the walk itself (procfs's links, which
 * jump without a lookup, by the kernel). */
#ifndef SQUASH_USER_FUSE_WALK_H
#define SQUASH_USER_FUSE_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Links followed at most on one walk, as the kernel's MAXSYMLINKS. */
#define SQUASH_WALK_LINKS_MAX 40

/* Mounts found fit before, by unique id (squash_mount_unique_id): a walk
 * takes them as fit without reading mountinfo, which any user can make
 * long (16 KiB a line for a FUSE mount of theirs at a long path: 70 ms a
 * read at 1,000 of them), and adds the plain mounts it found fit
 * (squash_mount_is_plain), the oldest making room. Only mounts of the
 * walker's own namespace are ever found fit, and no user can mount a
 * plain file system there. */
#define SQUASH_FIT_MOUNTS_MAX 16
struct squash_fit_mounts {
	uint64_t ids[SQUASH_FIT_MOUNTS_MAX];
	uint32_t n;    /* ids held, at most SQUASH_FIT_MOUNTS_MAX */
	uint32_t next; /* where the next one goes once full */
};

bool squash_fit_mounts_has(const struct squash_fit_mounts *f, uint64_t id);
void squash_fit_mounts_add(struct squash_fit_mounts *f, uint64_t id);

/* path opened O_PATH with the caller's rights, following symbolic links
 * on the way but not a last one. -1 with errno as open(2) sets it (ELOOP
 * with *last_is_link when the last component is a symbolic link; relative
 * paths from the working directory), or -1 with errno EPERM and why
 * (worded to follow "image X ", as user_fuse.h's) when the walk would
 * enter a mount user_fuse.h refuses. A mount it cannot tell about (an
 * overlay whose layers this namespace does not see: a container's root)
 * is passed through, as open(2) did; with strict, the last component's
 * own mount must be told fit (an image: squashd holds a descriptor of it).
 * fit may be NULL (mountinfo is then read for every mount judged). */
int squash_open_beside_user_fuse(const char *path, bool strict, bool *last_is_link,
				 struct squash_fit_mounts *fit, char *why, size_t len);

#endif
