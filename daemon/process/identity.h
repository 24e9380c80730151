/* A job user's identity as squashd acts with it: uid, primary gid from the
 * passwd database and all supplementary groups. */
#ifndef SQUASHD_IDENTITY_H
#define SQUASHD_IDENTITY_H

#include <sys/types.h>

#include "util/result.h"

#define IDENTITY_MAX_GROUPS 1024
/* The kernel's overflow uid and gid, which own nothing: what squashd's
 * helpers that need no one's rights run as. */
#define IDENTITY_NOBODY 65534

struct identity {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[IDENTITY_MAX_GROUPS];
	char name[256];
};

/* Looks the user up (getpwuid_r, getgrouplist). Unknown uid: user error. */
enum result identity_lookup(uid_t uid, struct identity *id, char *err,
			    size_t errlen);

/* In a forked child: drops to id for good (setgroups, setgid, setuid, in that
 * order, then checks root cannot be regained). Returns 0 or -1 (errno). */
int identity_become(const struct identity *id);

/* The same with raw system calls (setresuid and friends), for a child the
 * spawner made with clone3, which glibc's set*id wrappers do not know
 * about. Returns 0 or an errno. */
int identity_become_raw(const struct identity *id);

#endif
