#include "config.h"

#include "reader/session.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* libfuse 3.18 ends the threads beyond the idle count after each request
 * and starts new ones for the next: a cold walk paid 20% for that, and
 * kept threads win it back. 3.14 (Debian 12) showed no such cost, and
 * kept threads cost memory (docs/performance.md, section 11). */
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
#define IDLE_THREADS(max) (max)
#else
#define IDLE_THREADS(max) 2
#endif

struct session {
	struct fuse_session *se;
	struct fuse_args args;
	char opts[512];
	char *argv[8];
	bool own_signals;
	unsigned max_threads;
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
	/* Signal handlers are per process: a reader serving several mounts
	 * (serve.c) leaves signals at their defaults. */
	if (s->own_signals && fuse_set_signal_handlers(s->se) < 0)
		goto fail_destroy;
	if (fuse_session_mount(s->se, opt->mountpoint) < 0) {
		fprintf(stderr, "squash-reader: cannot mount on %s\n", opt->mountpoint);
		goto fail_signals;
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
fail_signals:
	if (s->own_signals)
		fuse_remove_signal_handlers(s->se);
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

int session_serve(struct session *s)
{
	int fd = fuse_session_fd(s->se), fl = fcntl(fd, F_GETFL);
	struct fuse_loop_config *cfg;
	int status;

	/* libfuse's loops end at a read that would block: a connection taken
	 * over from a --serve reader (serve_pool.c) is non-blocking. */
	if (fl >= 0 && (fl & O_NONBLOCK))
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	if (s->max_threads <= 1)
		return fuse_session_loop(s->se) == 0 ? 0 : 1;
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return 1;
	/* No clone_fd: a cloned descriptor's unanswered requests end with
	 * an error when the reader dies, instead of waiting for a resend. */
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	fuse_loop_cfg_set_max_threads(cfg, s->max_threads);
	fuse_loop_cfg_set_idle_threads(cfg, IDLE_THREADS(s->max_threads));
	status = fuse_session_loop_mt(s->se, cfg) == 0 ? 0 : 1;
	fuse_loop_cfg_destroy(cfg);
	return status;
}

void session_close(struct session *s)
{
	fuse_session_unmount(s->se);
	if (s->own_signals)
		fuse_remove_signal_handlers(s->se);
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
	status = session_serve(s);
	session_close(s);
	return status;
}
