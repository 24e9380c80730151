#include "config.h"

#include "reader/session.h"

#include <errno.h>
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

bool session_io_uring_built(void)
{
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
	return true;
#else
	return false;
#endif
}

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

int session_run(struct reader *rd, const struct session_options *opt)
{
	char *argv[8];
	int argc = 0, status = 1, r;
	char opts[512];
	struct fuse_args args;
	struct fuse_session *se;
	struct fuse_loop_config *cfg;

	argv[argc++] = (char *)"squash-reader";
	snprintf(opts, sizeof(opts), "ro,default_permissions,fsname=squash-reader,subtype=squashfs%s%s",
		 opt->mount_opts ? "," : "", opt->mount_opts ? opt->mount_opts : "");
	argv[argc++] = (char *)"-o";
	argv[argc++] = opts;
	if (opt->debug)
		argv[argc++] = (char *)"-d";
#if FUSE_VERSION >= FUSE_MAKE_VERSION(3, 18)
	/* Requests over io_uring rings where the kernel allows it (fuse
	 * module parameter enable_uring); libfuse falls back to read/write. */
	argv[argc++] = (char *)"-o";
	argv[argc++] = (char *)"io_uring";
#endif
	argv[argc] = NULL;
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);

	se = fuse_session_new(&args, &reader_ops, sizeof(reader_ops), rd);
	if (!se) {
		fprintf(stderr, "squash-reader: cannot start a FUSE session\n");
		return 1;
	}
	/* Signal handlers are per process: a reader serving several mounts
	 * (serve.c) leaves signals at their defaults. */
	if (opt->own_signals && fuse_set_signal_handlers(se) < 0)
		goto out_destroy;
	if (fuse_session_mount(se, opt->mountpoint) < 0) {
		fprintf(stderr, "squash-reader: cannot mount on %s\n", opt->mountpoint);
		goto out_signals;
	}
	if (opt->resume) {
		fake_init(se);
		r = ask_resend(fuse_session_fd(se));
		if (r < 0)
			fprintf(stderr, "squash-reader: the kernel cannot resend requests in flight (%s); "
				"requests the previous reader left unanswered stay unanswered\n",
				strerror(-r));
	}
	if (opt->max_threads <= 1) {
		status = fuse_session_loop(se) == 0 ? 0 : 1;
	} else {
		cfg = fuse_loop_cfg_create();
		if (!cfg)
			goto out_unmount;
		/* No clone_fd: a cloned descriptor's unanswered requests end with
		 * an error when the reader dies, instead of waiting for a resend. */
		fuse_loop_cfg_set_clone_fd(cfg, 0);
		fuse_loop_cfg_set_max_threads(cfg, opt->max_threads);
		fuse_loop_cfg_set_idle_threads(cfg, 2);
		status = fuse_session_loop_mt(se, cfg) == 0 ? 0 : 1;
		fuse_loop_cfg_destroy(cfg);
	}
out_unmount:
	fuse_session_unmount(se);
out_signals:
	if (opt->own_signals)
		fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return status;
}
