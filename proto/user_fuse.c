#include "config.h"
#include "user_fuse.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount_layers.h"
#include "mount_table_cache.h"

#define COPY_IT " (copy it to a normal file system)"

/* One decision in progress: the table, how far down it is, and the chain
 * of stacked mounts above, for the message ("overlay at /m, with the
 * layer /l, which is on "). */
struct judging {
	const struct squash_mount_table *t;
	bool any_fuse; /* root's allow_other mounts count too */
	int depth, judged;
	const struct squash_mount *above[SQUASH_STACK_DEPTH_MAX + 1]; /* the stacked mounts judging this */
	char chain[1024];
	char *why;
	size_t len;
};

static int judge_mount(struct judging *j, const struct squash_mount *m);

/* Refused: "is on " + the chain + what, as one message. */
static int refuse(struct judging *j, const char *what)
{
	snprintf(j->why, j->len, "is on %s%s", j->chain, what);
	return SQUASH_FUSE_REFUSED;
}

/* Not understood: refused all the same (SQUASH_FUSE_UNKNOWN, which a
 * walk lets through where it only passes, user_fuse_walk.c). */
static int cannot_tell(struct judging *j, const char *cause)
{
	char copy[640];

	snprintf(copy, sizeof(copy), "%s", cause);
	if (j->any_fuse)
		snprintf(j->why, j->len, "cannot be checked for FUSE mounts (%s); squashd's walk enters none", copy);
	else
		snprintf(j->why, j->len, "cannot be checked for a user's FUSE server (%s); squashd does not open "
			 "images it cannot check" COPY_IT, copy);
	return SQUASH_FUSE_UNKNOWN;
}

/* user_id=N, exactly one item of the super options, N decimal. */
static int fuse_owner(const char *opts, long *uid)
{
	size_t n;
	int count;
	const char *v = squash_mount_option(opts, "user_id", &n, &count);
	long u = 0;

	if (!v || count != 1 || n == 0 || n > 10)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		u = u * 10 + (v[i] - '0');
	}
	*uid = u;
	return 0;
}

static int judge_fuse(struct judging *j, const struct squash_mount *m)
{
	char what[320];
	long uid;

	if (j->any_fuse) {
		snprintf(what, sizeof(what), "a FUSE mount (%.256s); squashd's walk enters none", m->fstype);
		return refuse(j, what);
	}
	if (fuse_owner(m->super_options, &uid) < 0) {
		snprintf(what, sizeof(what), "the FUSE mount at %.256s shows no single user_id", m->mount_point);
		return cannot_tell(j, what);
	}
	if (uid != 0) {
		snprintf(what, sizeof(what), "a FUSE file system that uid %ld mounted; squashd does not open images "
			 "served by a user's FUSE server" COPY_IT, uid);
		return refuse(j, what);
	}
	if (!squash_mount_option_flag(m->super_options, "allow_other"))
		return refuse(j, "a FUSE file system mounted without allow_other; squashd does not open images "
			      "there" COPY_IT);
	return 0;
}

/* path made absolute-only, without "." or ".." components, repeated or
 * trailing slashes; -1 when it is not such a path or too long. */
static int normalise(const char *path, char *out, size_t len)
{
	size_t o = 0;

	if (path[0] != '/')
		return -1;
	for (const char *p = path; *p;) {
		while (*p == '/')
			p++;
		size_t n = strcspn(p, "/");
		if (!n)
			break;
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return -1;
		if (o + 1 + n + 1 > len)
			return -1;
		out[o++] = '/';
		memcpy(out + o, p, n);
		o += n;
		p += n;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

/* One layer of a stacked mount: every mount at the longest mount point
 * above its path (all of a stack of mounts there) is judged in turn. */
static int judge_layer(const char *path, void *arg)
{
	struct judging *j = arg;
	char *norm = malloc(PATH_MAX), what[600];
	size_t n = 0, chain_len = strlen(j->chain);
	int rc = 0;

	if (!norm)
		return cannot_tell(j, "out of memory");
	if (normalise(path, norm, PATH_MAX) < 0) {
		snprintf(what, sizeof(what), "a layer path '%.256s' that is not absolute and plain", path);
		rc = cannot_tell(j, what);
	} else if (!(n = squash_mount_table_longest_prefix(j->t, norm))) {
		snprintf(what, sizeof(what), "the layer %.256s is under no mount", norm);
		rc = cannot_tell(j, what);
	}
	for (size_t i = 0; i < j->t->count && !rc; i++) {
		const struct squash_mount *m = &j->t->mounts[i];
		if (strlen(m->mount_point) != n || !squash_mount_point_covers(m->mount_point, norm))
			continue;
		bool seen = false;
		for (int k = 0; k < j->depth; k++)
			seen |= j->above[k] == m;
		/* Its path names a mount of the mounter's view (before a
		 * pivot_root), not of this namespace's. The trusted walk asks
		 * only that no FUSE mount squashd sees is on its way: a
		 * container's root must not send every trusted image to FUSE. */
		if (seen && j->any_fuse)
			continue;
		if (seen) {
			const struct squash_mount *up = j->above[j->depth - 1];
			snprintf(what, sizeof(what), "the layer %.200s of %.32s at %.200s is not visible in this "
				 "mount namespace (mounted before a pivot_root or chroot?)", norm, up->fstype,
				 up->mount_point);
			rc = cannot_tell(j, what);
			break;
		}
		snprintf(j->chain + chain_len, sizeof(j->chain) - chain_len, "the layer %s, which is on ", norm);
		rc = judge_mount(j, m);
	}
	j->chain[chain_len] = '\0';
	free(norm);
	return rc;
}

static int judge_mount(struct judging *j, const struct squash_mount *m)
{
	char what[512];
	size_t chain_len = strlen(j->chain);
	int rc;

	if (j->depth > SQUASH_STACK_DEPTH_MAX || ++j->judged > SQUASH_STACK_MOUNTS_MAX) {
		snprintf(what, sizeof(what), "mounts stacked more than %d deep or %d in all under %.256s",
			 SQUASH_STACK_DEPTH_MAX, SQUASH_STACK_MOUNTS_MAX, m->mount_point);
		return cannot_tell(j, what);
	}
	if (squash_fstype_is_fuse(m->fstype))
		return judge_fuse(j, m);
	snprintf(j->chain + chain_len, sizeof(j->chain) - chain_len, "%s at %s, with ", m->fstype,
		 m->mount_point);
	j->above[j->depth++] = m;
	rc = squash_mount_layers(m, judge_layer, j, what, sizeof(what));
	j->depth--;
	j->chain[chain_len] = '\0';
	if (rc < 0)
		return cannot_tell(j, what);
	return rc;
}

int squash_user_fuse_verdict(const struct squash_mount_table *t, uint64_t mnt_id, bool any_fuse, char *why,
			     size_t len)
{
	struct judging j = { .t = t, .any_fuse = any_fuse, .why = why, .len = len };
	const struct squash_mount *m = squash_mount_table_by_id(t, mnt_id);

	if (!m && any_fuse) {
		snprintf(why, len, "is on a mount (id %llu) that is not in squashd's mountinfo",
			 (unsigned long long)mnt_id);
		return SQUASH_FUSE_REFUSED;
	}
	if (!m) {
		/* Reached through another namespace (a path through
		 * /proc/PID/root), where a user may have mounted anything. */
		snprintf(why, len, "is on a mount of another mount namespace (a path through /proc/PID/root?), "
			 "where its file system cannot be told; squashd does not open images there (use a path "
			 "every process on the node sees)");
		return SQUASH_FUSE_REFUSED;
	}
	return judge_mount(&j, m);
}

bool squash_user_fuse_judge(const struct squash_mount_table *t, uint64_t mnt_id, bool any_fuse, char *why,
			    size_t len)
{
	return squash_user_fuse_verdict(t, mnt_id, any_fuse, why, len) != SQUASH_FUSE_OK;
}

struct judge_here_args {
	uint64_t mnt_id;
	bool any_fuse;
	char *why;
	size_t len;
};

static int judge_with(const struct squash_mount_table *t, void *arg)
{
	struct judge_here_args *a = arg;

	return squash_user_fuse_verdict(t, a->mnt_id, a->any_fuse, a->why, a->len);
}

/* The verdict on mount mnt_id by /proc/self/mountinfo, as kept
 * (mount_table_cache.h); any verdict but yes is looked at again in the
 * table read now. */
static bool judge_here(uint64_t mnt_id, bool any_fuse, char *why, size_t len)
{
	struct judge_here_args a = { mnt_id, any_fuse, why, len };
	char cause[256];
	int verdict = squash_mount_table_cached(false, judge_with, &a, cause, sizeof(cause));

	if (verdict != SQUASH_FUSE_OK)
		verdict = squash_mount_table_cached(true, judge_with, &a, cause, sizeof(cause));
	if (verdict < 0) {
		struct judging j = { .any_fuse = any_fuse, .why = why, .len = len };
		return cannot_tell(&j, cause) != 0;
	}
	return verdict != SQUASH_FUSE_OK;
}

bool squash_mount_reaches_fuse(uint64_t mnt_id, char *why, size_t len)
{
	return judge_here(mnt_id, true, why, len);
}

uint64_t squash_mount_id(int fd, char *why, size_t len)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) != 0 ||
	    !(sx.stx_mask & STATX_MNT_ID)) {
		snprintf(why, len, "cannot be checked for a user's FUSE server (the kernel gives no mount id: statx "
			 "STATX_MNT_ID, Linux 5.8 and later); squashd does not open images it cannot check");
		return 0;
	}
	return sx.stx_mnt_id;
}

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

uint64_t squash_mount_unique_id(int fd)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID_UNIQUE, &sx) != 0 ||
	    !(sx.stx_mask & STATX_MNT_ID_UNIQUE))
		return 0;
	return sx.stx_mnt_id;
}

static int any_layer(const char *path, void *arg)
{
	(void)path;
	(void)arg;
	return 1;
}

bool squash_mount_is_plain(const struct squash_mount_table *t, uint64_t mnt_id)
{
	const struct squash_mount *m = squash_mount_table_by_id(t, mnt_id);
	char why[256];

	return m && squash_mount_layers(m, any_layer, NULL, why, sizeof(why)) == 0;
}

bool squash_user_fuse_refuses(int fd, char *why, size_t len)
{
	uint64_t id = squash_mount_id(fd, why, len);

	return !id || judge_here(id, false, why, len);
}

bool squash_fstype_is_fuse(const char *fstype)
{
	return !strcmp(fstype, "fuse") || !strncmp(fstype, "fuse.", 5) || !strcmp(fstype, "fuseblk");
}

bool squash_user_fuse_path(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	bool refused;

	if (fd < 0)
		return false;
	refused = squash_user_fuse_refuses(fd, buf, len);
	close(fd);
	return refused;
}
