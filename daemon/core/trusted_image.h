/* Whether a user's image may reach the kernel's squashfs parser, decided
 * on objects, never on names (docs/security.md, "Trusted images").
 *
 * The user's descriptor only proposes a candidate. squashd then reaches a
 * file itself, as root, in its own mount namespace: from "/" one component
 * at a time, never following a symbolic or magic link, never entering a
 * FUSE mount (each mount met is read from mountinfo first), every directory
 * root-controlled (or a root-owned sticky directory), the file below a
 * trusted prefix, root-controlled, on a file system type the admin allows
 * for kernel mounts (never FUSE). The kernel mount is given only when that
 * file is the very object of the user's descriptor (device, inode and
 * mount id from statx), and then only root's own descriptor is used. */
#ifndef SQUASHD_TRUSTED_IMAGE_H
#define SQUASHD_TRUSTED_IMAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "settings/settings.h"

/* Returns root's own read-only descriptor of the trusted image behind
 * user_fd (the caller closes it), or -1 with the reason in why. Never
 * waits on the user's file system: user_fd is only statx'ed from the
 * inode cache (AT_STATX_DONT_SYNC). */
int trusted_image_open(const struct squashd_config *cfg, int user_fd, char *why, size_t whylen);

/* At start: reads fs.protected_hardlinks. When it is off, users may link
 * root's files into directories they can write, so sticky directories
 * (which those are) lose their exemption in the walk; logs a warning. */
void trusted_image_init(void);

#endif
