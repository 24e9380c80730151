/* Union mounts: the FUSE images of one holder at one target served by the
 * user's squash-reader as one mount (`squash-reader --union`,
 * daemon/reader/union_tree.h), instead of an overlayfs over one FUSE
 * mount per image (core/merge.h): a cold lookup then costs one round trip
 * to one process whatever the number of images, where the overlay asks
 * every image's mount in turn, and a 1,024-image dataset is one mount,
 * one session and one set of threads, not 1,024 of each. The view is
 * overlayfs's (tests/integration/test_reader_union_matches_overlayfs.py).
 *
 * A union mount is a registry mount (key.mode FUSE, key.owner_uid the
 * user, parts the images' keys, bottom first) shared by every holder of
 * that user that merges the same images in the same order, refcounted
 * once per image of the group, kept (mount/fuse_keep.h) and adopted after
 * a restart like a mount of one image. Used when the setting fuse_union
 * is on, the reader serves unions, and every image of the group goes to
 * FUSE; a group with a trusted image keeps the overlay (its kernel mounts
 * are shared by all users). docs/design-union-mounts.md says why. */
#ifndef SQUASHD_UNION_MOUNT_H
#define SQUASHD_UNION_MOUNT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/daemon.h"
#include "process/identity.h"
#include "util/result.h"

/* Whether id's FUSE groups may become unions under cfg. */
bool union_mount_wanted(const struct daemon_state *ds, const struct squashd_config *cfg,
			const struct identity *id);

/* The layers of a group whose images have these n keys (option order): an
 * image named twice counts where it is named last, as in an overlay
 * merge. Fills layers with indexes into keys, bottom first; returns how
 * many. */
size_t union_mount_layers(const struct mount_key *keys, size_t n, size_t *layers);

/* Mounts or shares the union of the n images open on fds (their keys;
 * bottom first, distinct, all FUSE, of id; n >= 2) for a holder's group at
 * target; *out gets one reference. top names the group in messages.
 * Closes the fds. Gives up at deadline_ms. */
enum result union_mount_get(struct daemon_state *ds, const struct squashd_config *cfg,
			    const struct identity *id, int *fds, const struct mount_key *keys,
			    size_t n, const char *top, const char *target, struct mount_entry **out,
			    char *err, size_t errlen, long long deadline_ms);

#endif
