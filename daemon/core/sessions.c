#include "config.h"
#include "core/sessions.h"

#include "core/merge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/log.h"

/* A session's directory: sessions_dir/PID. */
static int session_dir(const struct daemon_state *ds, pid_t pid, char *buf, size_t len)
{
	return snprintf(buf, len, "%s/%d", ds->sessions_dir, (int)pid) < (int)len ? 0 : -1;
}

/* Only the names squashd made are touched, never followed: the user may
 * enter the directory, not write in it. The slots are read from it, so
 * that a session that was never bound (a refused request) costs one
 * lookup instead of one per image a session may have. */
static void unbind_dir(const char *dir)
{
	char p[PATH_MAX + 16];
	unsigned char made[SQUASH_MAX_IMAGES / 8] = { 0 };
	struct dirent *de;
	DIR *d;
	int fd;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (errno != ENOENT)
			log_warning("cannot read session directory %s: %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char *end;
		unsigned long i = strtoul(de->d_name, &end, 10);

		if (de->d_name[0] >= '0' && de->d_name[0] <= '9' && !*end && i < SQUASH_MAX_IMAGES)
			made[i / 8] |= (unsigned char)(1u << (i % 8));
	}
	closedir(d);
	for (int i = 0; i < SQUASH_MAX_IMAGES; i++) {
		if (!(made[i / 8] & (1u << (i % 8))))
			continue;
		snprintf(p, sizeof(p), "%s/%d", dir, i);
		if (umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
			log_warning("detaching session bind %s: %s", p, strerror(errno));
		rmdir(p);
	}
	if (rmdir(dir) < 0 && errno != ENOENT)
		log_warning("cannot remove session directory %s: %s", dir, strerror(errno));
}

void sessions_unbind(const struct daemon_state *ds, pid_t pid)
{
	char dir[PATH_MAX];

	if (session_dir(ds, pid, dir, sizeof(dir)) == 0)
		unbind_dir(dir);
}

/* Detaches nothing but squashd's own binds: never waits on a user. */
static void unbind_ended(const char *dir, int timeout_ms)
{
	(void)timeout_ms;
	unbind_dir(dir);
}

/* An ended session's directory, moved aside: ".ended-PID-N". */
#define ENDED_PREFIX ".ended-"

void sessions_queue_unbind(const struct daemon_state *ds, pid_t pid, struct teardown *td)
{
	static atomic_uint seq;
	char dir[PATH_MAX], aside[PATH_MAX];
	struct teardown_dir *d;
	int r = -1;

	if (session_dir(ds, pid, dir, sizeof(dir)) < 0)
		return;
	/* Renamed now (one syscall that waits on nobody), so that a new
	 * session of a process that reuses the pid, maybe another user's,
	 * gets a directory the queued detach never touches. */
	for (int tries = 0; r < 0 && tries < 8; tries++) {
		if (snprintf(aside, sizeof(aside), "%s/" ENDED_PREFIX "%d-%u", ds->sessions_dir, (int)pid,
			     atomic_fetch_add(&seq, 1)) >= (int)sizeof(aside))
			break;
		r = renameat2(AT_FDCWD, dir, AT_FDCWD, aside, RENAME_NOREPLACE);
		if (r < 0 && errno == ENOENT)
			return; /* never bound */
		if (r < 0 && errno != EEXIST)
			break;
	}
	if (r < 0 || !(d = malloc(sizeof(*d) + strlen(aside) + 1))) {
		if (r == 0) {
			log_error("out of memory: detaching session directory %s with the lock held", aside);
			unbind_dir(aside);
		} else {
			log_warning("cannot move session directory %s aside (%s): detaching it with the lock held",
				    dir, strerror(errno));
			unbind_dir(dir);
		}
		return;
	}
	strcpy(d->path, aside);
	d->remove = unbind_ended;
	d->next = td->dirs;
	td->dirs = d;
}

/* Lets uid (and nobody else but root) enter and list the directory fd:
 * root:root 0700 plus the POSIX ACL entry user:UID:r-x, written as the
 * kernel's xattr (version 2; entries sorted by tag). The user gets no
 * write access: /run must not become a place users can fill. */
static int grant_user(int fd, uid_t uid)
{
	struct { uint16_t tag, perm; uint32_t id; } __attribute__((packed)) entries[] = {
		{ 0x01, 7, 0xffffffffu },     /* ACL_USER_OBJ rwx */
		{ 0x02, 5, (uint32_t)uid },   /* ACL_USER uid r-x */
		{ 0x04, 0, 0xffffffffu },     /* ACL_GROUP_OBJ --- */
		{ 0x10, 5, 0xffffffffu },     /* ACL_MASK r-x */
		{ 0x20, 0, 0xffffffffu },     /* ACL_OTHER --- */
	};
	uint8_t blob[4 + sizeof(entries)];
	uint32_t version = 2;

	/* The xattr is little-endian; so is every machine this builds for. */
	_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "POSIX ACL xattr needs byte swapping");
	memcpy(blob, &version, 4);
	memcpy(blob + 4, entries, sizeof(entries));
	return fsetxattr(fd, "system.posix_acl_access", blob, sizeof(blob), 0);
}

int sessions_bind(const struct daemon_state *ds, const struct job_entry *e, char *dir,
		  size_t dirlen, char *err, size_t errlen)
{
	char p[PATH_MAX + 16];
	int fd;

	sessions_unbind(ds, e->session_pid); /* an earlier process with this pid */
	if (session_dir(ds, e->session_pid, dir, dirlen) < 0 || mkdir(dir, 0700) < 0) {
		snprintf(err, errlen, "cannot create the session directory %s: %s", dir, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < e->count; i++) {
		/* A merge group is bound once, at its first image (squash-shell
		 * binds the first of each target). */
		bool repeat = false;
		for (size_t j = 0; j < i && !repeat; j++)
			repeat = !strcmp(e->images[j].target, e->images[i].target);
		if (repeat)
			continue;
		snprintf(p, sizeof(p), "%s/%zu", dir, i);
		/* Private: out of the node-level mount's peer group. Under a
		 * shared /run the bind still reaches the namespaces that
		 * receive /run's mounts, and the detach reaches them too:
		 * umount propagation follows the parent, not the bind. */
		if (mkdir(p, 0755) < 0 || mount(merge_source(e, i)->mount_point, p, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, p, NULL, MS_PRIVATE, NULL) < 0 ||
		    mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0) {
			snprintf(err, errlen, "cannot bind image %s for the session at %s: %s",
				 e->images[i].image, p, strerror(errno));
			sessions_unbind(ds, e->session_pid);
			return -1;
		}
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || grant_user(fd, e->uid) < 0) {
		snprintf(err, errlen, "cannot let uid %u into the session directory %s: %s%s",
			 (unsigned)e->uid, dir, strerror(errno),
			 errno == EOPNOTSUPP ? " (squashd's state_dir needs POSIX ACL support)" : "");
		if (fd >= 0)
			close(fd);
		sessions_unbind(ds, e->session_pid);
		return -1;
	}
	close(fd);
	return 0;
}

void sessions_remove_unknown_locked(struct daemon_state *ds)
{
	DIR *dir = opendir(ds->sessions_dir);

	for (struct dirent *de; dir && (de = readdir(dir));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		/* Ended sessions whose detach a stop or crash cut short. */
		if (!strncmp(de->d_name, ENDED_PREFIX, strlen(ENDED_PREFIX))) {
			char p[PATH_MAX + 256];

			snprintf(p, sizeof(p), "%s/%s", ds->sessions_dir, de->d_name);
			log_warning("cleaning up the ended session directory %s", p);
			unbind_dir(p);
			continue;
		}
		if (de->d_name[0] == '.' || *end || pid <= 0 || pid > 0x7fffffff)
			continue;
		if (!registry_find_session(&ds->registry, (pid_t)pid)) {
			log_warning("cleaning up the unknown session directory %s/%ld", ds->sessions_dir, pid);
			sessions_unbind(ds, (pid_t)pid);
		}
	}
	if (dir)
		closedir(dir);
}
