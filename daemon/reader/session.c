#include "config.h"

#include "reader/session.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "reader/serve_pool.h"
#include "reader/start_profile.h"

/* Linux 6.9 (protocol 7.40): move the requests a previous server read
 * but never answered back to the queue. Older headers lack it. */
#ifndef FUSE_NOTIFY_RESEND
#define FUSE_NOTIFY_RESEND 7
#endif

/* A unique id the kernel never hands out (it counts up from 0 in steps of
 * 2 and marks resent requests with bit 63): the reply to the made-up
 * INIT below matches no request and the kernel drops it (ENOENT). */
#define FAKE_INIT_UNIQUE 0x3ffffffffffff000ull

/* A resumed connection was initialised long ago; the kernel will not send
 * FUSE_INIT again, and libfuse answers EIO to everything before one. So
 * hand libfuse an INIT of our own making, carrying the flags the reader
 * asks for (which the kernel granted to the reader before, on the same
 * kernel). Its reply goes nowhere. */
static void fake_init(struct fuse_session *se)
{
	struct {
		struct fuse_in_header h;
		struct fuse_init_in in;
	} msg;
	struct fuse_buf buf;

	memset(&msg, 0, sizeof(msg));
	msg.h.len = sizeof(msg);
	msg.h.opcode = FUSE_INIT;
	msg.h.unique = FAKE_INIT_UNIQUE;
	msg.in.major = FUSE_KERNEL_VERSION;
	msg.in.minor = FUSE_KERNEL_MINOR_VERSION;
	msg.in.max_readahead = 128 * 1024;
	msg.in.flags = FUSE_ASYNC_READ | FUSE_DO_READDIRPLUS | FUSE_PARALLEL_DIROPS |
		       FUSE_NO_OPEN_SUPPORT | FUSE_NO_OPENDIR_SUPPORT | FUSE_MAX_PAGES |
		       FUSE_CACHE_SYMLINKS | FUSE_BIG_WRITES;
	memset(&buf, 0, sizeof(buf));
	buf.mem = &msg;
	buf.size = sizeof(msg);
	fuse_session_process_buf(se, &buf);
}

/* Returns 0, or -errno (-EINVAL: the kernel predates FUSE_NOTIFY_RESEND). */
static int ask_resend(int fd)
{
	struct fuse_out_header h = { .len = sizeof(h), .error = FUSE_NOTIFY_RESEND, .unique = 0 };
	ssize_t k;

	do
		k = write(fd, &h, sizeof(h));
	while (k < 0 && errno == EINTR);
	return k == (ssize_t)sizeof(h) ? 0 : -errno;
}

/* Workers a one-mount reader keeps at rest, as a --serve reader does. */
#define IDLE_THREADS 2

/* After SIGINT, SIGTERM or SIGHUP the mount is detached; a mount still in
 * use is given this long to end before the reader exits, which ends the
 * connection (processes inside get ENOTCONN, as with libfuse's loop). */
#define STOP_GRACE_MS 1000

struct session {
	struct fuse_session *se;
	struct fuse_args args;
	char opts[512];
	char *argv[8];
	bool own_signals;
	unsigned max_threads;
	unsigned poll_us;
};

struct session *session_open(struct reader *rd, const struct session_options *opt)
{
	struct session *s = calloc(1, sizeof(*s));
	int argc = 0, r;

	if (!s) {
		fprintf(stderr, "squash-reader: out of memory\n");
		return NULL;
	}
	s->own_signals = opt->own_signals;
	rd->plus.mode = opt->plus;
	s->max_threads = opt->max_threads;
	s->poll_us = opt->poll_us;
	s->argv[argc++] = (char *)"squash-reader";
	snprintf(s->opts, sizeof(s->opts),
		 "ro,default_permissions,fsname=squash-reader,subtype=squashfs%s%s",
		 opt->mount_opts ? "," : "", opt->mount_opts ? opt->mount_opts : "");
	s->argv[argc++] = (char *)"-o";
	s->argv[argc++] = s->opts;
	if (opt->debug)
		s->argv[argc++] = (char *)"-d";
	/* No "-o io_uring" (libfuse 3.18): requests in flight in a dead
	 * reader's rings are not resent to the next one (FUSE_NOTIFY_RESEND
	 * moves only those read from /dev/fuse), so a resumed mount would
	 * hang; and idle threads kept alive gain as much (docs/performance.md,
	 * section 11). */
	s->argv[argc] = NULL;
	s->args = (struct fuse_args)FUSE_ARGS_INIT(argc, s->argv);

	s->se = fuse_session_new(&s->args, &reader_ops, sizeof(reader_ops), rd);
	if (!s->se) {
		fprintf(stderr, "squash-reader: cannot start a FUSE session\n");
		goto fail;
	}
	rd->se = s->se;
	rd->push = opt->max_threads != 1;
	if (fuse_session_mount(s->se, opt->mountpoint) < 0) {
		fprintf(stderr, "squash-reader: cannot mount on %s\n", opt->mountpoint);
		goto fail_destroy;
	}
	if (opt->resume) {
		fake_init(s->se);
		r = ask_resend(fuse_session_fd(s->se));
		if (r < 0)
			fprintf(stderr, "squash-reader: the kernel cannot resend requests in flight (%s); "
				"requests the previous reader left unanswered stay unanswered\n",
				strerror(-r));
	}
	return s;
fail_destroy:
	fuse_session_destroy(s->se);
fail:
	fuse_opt_free_args(&s->args);
	free(s);
	return NULL;
}

struct fuse_session *session_fuse(struct session *s)
{
	return s->se;
}

static void one_ended(void *arg)
{
	uint64_t one = 1;

	if (write(*(int *)arg, &one, sizeof(one)) != (ssize_t)sizeof(one))
		fprintf(stderr, "squash-reader: cannot tell the end of the mount: %s\n", strerror(errno));
}

/* Waits for fds[0] (the end) or, with own signals, fds[1] (a signal) for
 * up to ms (-1: for ever). Returns which is readable, -1 when neither. */
static int wait_end_or_signal(struct pollfd *fds, int nfds, int ms)
{
	int r;

	do
		r = poll(fds, (nfds_t)nfds, ms);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return -1;
	return (fds[0].revents & POLLIN) ? 0 : 1;
}

int session_serve(struct session *s)
{
	struct pollfd fds[2] = { { .fd = -1, .events = POLLIN }, { .fd = -1, .events = POLLIN } };
	struct serve_pool *pool;
	sigset_t stop;
	int end_fd, r, nfds = 1;

	/* Signals are taken from a signalfd by this thread; every other
	 * thread blocks them all (serve_pool.c, idle_trim.c). */
	if (s->own_signals) {
		sigemptyset(&stop);
		sigaddset(&stop, SIGINT);
		sigaddset(&stop, SIGTERM);
		sigaddset(&stop, SIGHUP);
		signal(SIGPIPE, SIG_IGN);
		if (pthread_sigmask(SIG_BLOCK, &stop, NULL) != 0 ||
		    (fds[1].fd = signalfd(-1, &stop, SFD_CLOEXEC)) < 0) {
			fprintf(stderr, "squash-reader: cannot take signals: %s\n", strerror(errno));
			return 1;
		}
		nfds = 2;
	}
	end_fd = eventfd(0, EFD_CLOEXEC);
	pool = end_fd >= 0 ? serve_pool_new(s->max_threads ? s->max_threads : 1, IDLE_THREADS,
					    s->poll_us) : NULL;
	if (!pool) {
		fprintf(stderr, "squash-reader: cannot start the worker threads: %s\n", strerror(errno));
		goto fail;
	}
	if ((r = serve_pool_add(pool, s->se, one_ended, &end_fd)) != 0) {
		fprintf(stderr, "squash-reader: cannot serve the mount: %s\n", strerror(r));
		serve_pool_free(pool);
		goto fail;
	}
	fds[0].fd = end_fd;
	if (wait_end_or_signal(fds, nfds, -1) == 1) {
		/* Detached now; it ends once nothing inside is in use. */
		fuse_session_unmount(s->se);
		if (wait_end_or_signal(fds, 1, STOP_GRACE_MS) != 0) {
			fprintf(stderr, "squash-reader: the mount is still in use; ending its connection\n");
			fflush(stderr);
			_exit(0);
		}
	}
	serve_pool_free(pool);
	close(end_fd);
	if (fds[1].fd >= 0)
		close(fds[1].fd);
	return 0;
fail:
	if (end_fd >= 0)
		close(end_fd);
	if (fds[1].fd >= 0)
		close(fds[1].fd);
	return 1;
}

void session_close(struct session *s)
{
	fuse_session_unmount(s->se);
	fuse_session_destroy(s->se);
	fuse_opt_free_args(&s->args);
	free(s);
}

int session_run(struct reader *rd, const struct session_options *opt)
{
	struct session *s = session_open(rd, opt);
	int status;

	if (!s)
		return 1;
	/* A mount on a directory of ours (not squashd's /dev/fd/N, whose
	 * root squashd hands over: serve.c): its start profile walked. */
	if (rd->img && !opt->resume && strncmp(opt->mountpoint, "/dev/fd/", 8) != 0)
		start_profile_walk_begin(rd->img, open(opt->mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC));
	status = session_serve(s);
	session_close(s);
	return status;
}
