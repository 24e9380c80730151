/* Which user answers for a peer (daemon/util/peer.c, peer.user): a
 * process in the node's user namespace answers for itself; one in a user
 * namespace a user made (a rootless container over the user's
 * subordinate uid range) answers as that user, however deep it nests; one
 * in a namespace root made answers for itself; a process gone answers as
 * PEER_USER_GONE. Needs root (to write the namespaces' uid maps). */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/peer.h"
#include "unit.h"

#define OWNER 4321u
#define RANGE_START 200000u

struct child {
	pid_t pid;
	int to[2], from[2];
};

static void child_wait(int fd)
{
	char c;
	if (read(fd, &c, 1) != 1)
		_exit(3);
}

static void child_say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(3);
}

/* A child that becomes as_uid (unless 0), makes nest user namespaces
 * one in the other (asking the parent to map the first over RANGE_START..;
 * the second has no map), takes inner_uid inside the first, then waits to
 * be killed. Says 'u' when a
 * namespace wants its map, 'r' when ready, 'n' when it cannot. */
static bool child_start(struct child *c, uid_t as_uid, int nest, uid_t inner_uid)
{
	if (pipe(c->to) < 0 || pipe(c->from) < 0)
		return false;
	c->pid = fork();
	if (c->pid < 0)
		return false;
	if (c->pid > 0) {
		close(c->to[0]);
		close(c->from[1]);
		return true;
	}
	close(c->to[1]);
	close(c->from[0]);
	/* No groups of root's left: a namespace made inside must map them. */
	if (as_uid && (setgroups(0, NULL) < 0 || setresgid(as_uid, as_uid, as_uid) < 0 || setresuid(as_uid, as_uid, as_uid) < 0))
		_exit(2);
	for (int level = 0; level < nest; level++) {
		if (unshare(CLONE_NEWUSER) < 0) {
			child_say(c->from[1], 'n');
			pause();
			_exit(0);
		}
		if (level == 0) {
			child_say(c->from[1], 'u');
			child_wait(c->to[0]);
			if (setresgid(inner_uid, inner_uid, inner_uid) < 0 ||
			    setresuid(inner_uid, inner_uid, inner_uid) < 0)
				_exit(2);
		}
	}
	child_say(c->from[1], 'r');
	pause();
	_exit(0);
}

/* Runs the child's protocol; returns its state: 'r' ready, 'n' cannot. */
static char child_ready(struct child *c)
{
	char said;

	for (;;) {
		if (read(c->from[0], &said, 1) != 1)
			return 'x';
		if (said != 'u')
			return said;
		/* gids too: a namespace can be made inside only by a process
		 * whose uid and gid it maps. */
		char map[64];
		snprintf(map, sizeof(map), "0 %u 1000\n", RANGE_START);
		for (int i = 0; i < 2; i++) {
			char path[64];
			snprintf(path, sizeof(path), "/proc/%d/%s", (int)c->pid, i ? "gid_map" : "uid_map");
			int fd = open(path, O_WRONLY | O_CLOEXEC);
			bool ok = fd >= 0 && write(fd, map, strlen(map)) == (ssize_t)strlen(map);
			if (fd >= 0)
				close(fd);
			if (!ok)
				return 'n';
		}
		child_say(c->to[1], 'g');
	}
}

static void child_end(struct child *c)
{
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
	close(c->to[1]);
	close(c->from[0]);
}

/* peer.user of a child made as said, or skips. */
static void check_child(uid_t as_uid, int nest, uid_t inner_uid, uid_t kernel_uid, uid_t want,
			const char *what)
{
	struct child c;

	if (!child_start(&c, as_uid, nest, inner_uid)) {
		CHECK(!"fork");
		return;
	}
	char state = child_ready(&c);
	if (state == 'r') {
		uid_t got = peer_user_of(c.pid, kernel_uid);
		if (got != want)
			fprintf(stderr, "%s: user %u, expected %u\n", what, (unsigned)got, (unsigned)want);
		CHECK_INT(got, want);
	} else {
		UNIT_SKIP("%s: user namespaces cannot be made here", what);
	}
	child_end(&c);
}

int main(void)
{
	if (geteuid() != 0) {
		UNIT_SKIP("needs root (to map the namespaces' uids)");
		return unit_exit_code();
	}
	/* The node's own namespace: each uid for itself, root for none. */
	CHECK_INT(peer_user_of(getpid(), 0), 0);
	check_child(OWNER, 0, 0, OWNER, OWNER, "a user's process");
	/* A user's namespace over a subordinate range: uid 5 inside is
	 * RANGE_START + 5 outside, and answers as the namespace's owner. */
	check_child(OWNER, 1, 5, RANGE_START + 5, OWNER, "a user's namespace");
	/* Nested: the inner namespace's owner is RANGE_START + 5, the outer's
	 * is the user: the outer one decides. */
	check_child(OWNER, 2, 5, RANGE_START + 5, OWNER, "a user's nested namespaces");
	/* A namespace root made (a container runtime's): its processes answer
	 * for themselves, not for root. */
	check_child(0, 1, 5, RANGE_START + 5, RANGE_START + 5, "root's namespace");
	/* Gone before squashd looked. */
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	CHECK_INT(peer_user_of(gone, OWNER), PEER_USER_GONE);
	return unit_exit_code();
}
