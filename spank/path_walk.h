/* Walking a path one component at a time, never through a symbolic link,
 * for the mount points a task binds on: a user who owns a directory on
 * the way must not redirect a root-made mount elsewhere. */
#ifndef SPANK_SQUASH_PATH_WALK_H
#define SPANK_SQUASH_PATH_WALK_H

#include <stdbool.h>
#include <stddef.h>

/* Walks path from dirfd, which stands for the part of path before skip
 * bytes. With create, missing directories are made (mode 0755 whatever the
 * umask). Returns an O_PATH descriptor of the last directory, or -1 with
 * err. */
int squash_path_walk(int dirfd, const char *path, size_t skip, bool create,
		     char *err, size_t errlen);

/* squash_path_walk of an absolute path from /, creating nothing, and
 * entering no FUSE file system that a user mounted or that is mounted
 * without allow_other (proto/user_fuse.h): a target outside squashd's base
 * directory lies in directories users may mount on. */
int squash_path_walk_from_root(const char *path, char *err, size_t errlen);

#endif
