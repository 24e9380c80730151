/* Where an image may be mounted inside a job: the textual part of the target
 * policy, shared by the plugin (early errors) and squashd (authoritative).
 * The filesystem part (no symlink in the path) is checked where the bind
 * happens, by walking the path with O_NOFOLLOW. */
#ifndef SQUASH_TARGET_H
#define SQUASH_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#define SQUASH_MAX_PREFIXES 16

/* The base of default targets (BASE/NAME) unless the site sets its own:
 * squashd.conf's base_dir, the plugin's default_target. */
#define SQUASH_DEFAULT_BASE "/squash"

/* A list of allowed prefixes parsed from "P1:P2:...". In allowed_targets
 * an item may instead be "=DIR": DIR itself is a target (a directory
 * the site makes on every node, such as uenv's /user-environment), not a
 * prefix. */
struct squash_prefixes {
	size_t count;
	char *items[SQUASH_MAX_PREFIXES];
	bool exact[SQUASH_MAX_PREFIXES];
};

/* Parses a colon-separated list of absolute, normalised directories that
 * are not system paths. Returns 0, or -1 with err naming the bad entry. */
int squash_prefixes_parse(const char *text, struct squash_prefixes *out,
			  char *err, size_t errlen);
void squash_prefixes_free(struct squash_prefixes *p);

/* The same for directories of images (trusted_prefixes): any absolute,
 * normalised directory but "/", system ones included (/srv/images,
 * /usr/share/images): the trust check decides on the image's path
 * itself, and a mount point never comes from this list. */
int squash_image_dirs_parse(const char *text, struct squash_prefixes *out, char *err, size_t errlen);

/* The same for allowed_targets, whose items may also be "=DIR" (exact). */
int squash_allowed_targets_parse(const char *text, struct squash_prefixes *out, char *err,
				 size_t errlen);

/* The list as it is written ("/squash:=/user-environment") into buf. */
void squash_prefixes_format(const struct squash_prefixes *p, char *buf, size_t buflen);

/* True when path lies strictly below one of the prefixes (on a component
 * boundary: /squash/x is below /squash, /squashX and /squash are not). */
bool squash_prefixes_contain(const struct squash_prefixes *p, const char *path);

/* True when path is / or is, or lies under, a system directory: /etc, /usr,
 * /bin, /sbin, /lib, /lib32, /lib64, /libx32, /var, /run, /proc, /sys,
 * /dev, /boot, /root, /srv, /opt is not one (sites list it when they want). */
bool squash_is_system_path(const char *path);

/* Checks a target: absolute, at most SQUASH_PATH_MAX-1 bytes, no empty, "."
 * or ".." component, no trailing '/', no ',' ':' or control characters, not
 * a system path, and strictly below one of the allowed prefixes or one of
 * its exact targets. Returns 0 or -1 with a user-facing reason in err. */
int squash_target_check(const char *target, const struct squash_prefixes *allowed,
			char *err, size_t errlen);

/* True when a and b are the same path or one lies below the other (on a
 * component boundary: /squash/x and /squash/xy do not overlap). */
bool squash_targets_overlap(const char *a, const char *b);

/* Checks two items of one job (image_a mounted on target_a, image_b on
 * target_b, in that order): one target inside the other is refused with a
 * reason naming both. Nested mounts are refused because the inner mount
 * point would have to be made inside a read-only image (the step fails
 * with EROFS) or the outer mount would hide the inner one. The same target
 * twice is fine: the images form a merge group, one read-only tree (the
 * later image over the earlier where paths collide). Returns 0, or -1
 * with err. */
int squash_target_pair_check(const char *image_a, const char *target_a,
			     const char *image_b, const char *target_b,
			     char *err, size_t errlen);

/* squash_target_pair_check, and a merge group (equal targets) may not hold
 * a writable (:rw) image: the merged tree is read-only. What the plugin and
 * squashd both apply to every pair of a job's items. */
int squash_target_merge_check(const char *image_a, const char *target_a, bool writable_a,
			      const char *image_b, const char *target_b, bool writable_b,
			      char *err, size_t errlen);

/* A step's own image (step_image at step_target) against one of its job's
 * images: a step sees the job's images and its own, so their targets may
 * not be equal, nor one inside the other. Returns 0 when they are apart,
 * 1 when it is the very same image at the same target (the job's mount
 * serves it), -1 when they clash, with the reason in err ("its target ...
 * lies inside the target ... of the job's image ...; ..."), for the
 * plugin's early error and squashd's check alike. */
int squash_step_target_clash(const char *job_image, const char *job_target,
			     const char *step_image, const char *step_target,
			     char *err, size_t errlen);

#endif
