#include "config.h"

#include "process/identity.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum result identity_lookup(uid_t uid, struct identity *id, char *err,
			    size_t errlen)
{
	struct passwd pw, *res = NULL;
	long size = sysconf(_SC_GETPW_R_SIZE_MAX);
	char *buf;
	int rc;

	memset(id, 0, sizeof(*id));
	if (size < 1024)
		size = 1024;
	/* Grow on ERANGE, but bounded: a passwd entry is never megabytes. */
	for (;;) {
		buf = malloc((size_t)size);
		if (buf == NULL) {
			snprintf(err, errlen, "looking up uid %u: out of memory",
				 (unsigned)uid);
			return RESULT_NODE_ERROR;
		}
		rc = getpwuid_r(uid, &pw, buf, (size_t)size, &res);
		if (rc != ERANGE || size >= (1L << 20))
			break;
		free(buf);
		size *= 2;
	}
	if (res == NULL) {
		free(buf);
		if (rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF ||
		    rc == EPERM) {
			snprintf(err, errlen, "uid %u is not a known user on this node",
				 (unsigned)uid);
			return RESULT_USER_ERROR;
		}
		snprintf(err, errlen, "looking up uid %u: %s", (unsigned)uid,
			 strerror(rc));
		return RESULT_NODE_ERROR;
	}

	id->uid = pw.pw_uid;
	id->gid = pw.pw_gid;
	snprintf(id->name, sizeof(id->name), "%s", pw.pw_name);

	int ngroups = IDENTITY_MAX_GROUPS;
	if (getgrouplist(pw.pw_name, pw.pw_gid, id->groups, &ngroups) < 0) {
		/* Acting with a partial group list could deny access the user
		 * really has, or confuse the user; refuse instead. */
		snprintf(err, errlen,
			 "user %s (uid %u) is in %d groups, more than the %d supported",
			 id->name, (unsigned)uid, ngroups, IDENTITY_MAX_GROUPS);
		free(buf);
		return RESULT_NODE_ERROR;
	}
	id->ngroups = ngroups;
	free(buf);
	return RESULT_OK;
}

int identity_become(const struct identity *id)
{
	if (setgroups((size_t)id->ngroups, id->groups) < 0)
		return -1;
	if (setgid(id->gid) < 0)
		return -1;
	if (setuid(id->uid) < 0)
		return -1;
	/* setuid() from root sets all three uids; make sure nothing let us
	 * keep a way back to root. */
	if (id->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* 32-bit platforms with 16-bit legacy calls name the full ones *32. */
#ifdef SYS_setresuid32
#define SQ_SETRESUID SYS_setresuid32
#define SQ_SETRESGID SYS_setresgid32
#define SQ_SETGROUPS SYS_setgroups32
#else
#define SQ_SETRESUID SYS_setresuid
#define SQ_SETRESGID SYS_setresgid
#define SQ_SETGROUPS SYS_setgroups
#endif

int identity_become_raw(const struct identity *id)
{
	if (syscall(SQ_SETGROUPS, (size_t)id->ngroups, id->groups) < 0 ||
	    syscall(SQ_SETRESGID, id->gid, id->gid, id->gid) < 0 ||
	    syscall(SQ_SETRESUID, id->uid, id->uid, id->uid) < 0)
		return errno ? errno : EPERM;
	/* No way back to root may be left. */
	if (id->uid != 0 && syscall(SQ_SETRESUID, (uid_t)-1, (uid_t)0, (uid_t)-1) == 0)
		return EPERM;
	return 0;
}
