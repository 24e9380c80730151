/* squash-shell: runs a shell or a command with squashfs images mounted at
 * their targets, the way a job sees them, on a node that runs squashd (a
 * login node), for the caller alone. See squash-shell(1).
 *
 * squashd does the mounting under the job policy (opened as the caller,
 * kernel or FUSE as for jobs) and binds each image into a directory only
 * the caller can enter; it keeps them while this process lives and releases
 * them when it exits, however it exits (squashd watches its pidfd). This
 * process stays as the parent and waits; the child makes a user and mount
 * namespace of its own (the caller's uid and gid mapped to themselves, no
 * privilege), binds the images on their targets there and runs the
 * command. The kernel locks the read-only, nosuid and nodev flags of the
 * binds it copies into that namespace, so the command cannot lift them. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "catalog.h"
#include "imagespec.h"
#include "images_env.h"
#include "mount_root.h"
#include "quote.h"
#include "squash_env.h"
#include "image_glob.h"
#include "target.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: squash-shell [OPTIONS] IMAGE[:TARGET][,IMAGE[:TARGET]...] [-- COMMAND [ARG...]]\n"
		"Runs COMMAND (default: $SHELL) with the images mounted read-only at their\n"
		"targets (default BASE/NAME, BASE being squashd's base_dir), in a mount\n"
		"namespace of its own.\n"
		"  -s, --socket PATH        squashd's socket (default $SQUASH_SOCKET or %s)\n"
		"  -m, --munge-socket PATH  munged's socket (default $SQUASH_MUNGE_SOCKET or MUNGE's)\n"
		"  -n, --no-munge           do not sign the request (squashd must allow it)\n"
		"  -b, --base DIR           base of default targets (default: squashd's base_dir)\n"
		"  -e, --env [IMAGE:]NAME[,...] set the environments NAME the images define\n"
		"                           (their /.squash/meta; IMAGE: only the image whose\n"
		"                           target ends in IMAGE); default: each image's\n"
		"                           default-env; none: no environment\n"
		"  -h, --help               this help\n",
		SQUASH_DEFAULT_SOCKET);
}

/* 125: squash-shell's own failures; a command it cannot run exits 127
 * when it was not found and 126 when it was found, as with env(1). */
static int die_status = 125;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("squash-shell: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(die_status);
}

/* Text from squashd or the user, with control characters shown escaped
 * (quote.h). */
static const char *shown(const char *s, char *buf, size_t len)
{
	return squash_quote(buf, len, s, strlen(s));
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		die("cannot write %s: %s (are unprivileged user namespaces allowed on this node?)", path,
		    strerror(errno));
	close(fd);
}

/* Own user and mount namespace: the caller's ids mapped to themselves. */
static void private_namespace(uid_t uid, gid_t gid)
{
	char map[64];

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		die("cannot make a private namespace: %s (are unprivileged user namespaces allowed "
		    "on this node?)", strerror(errno));
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	write_file("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	write_file("/proc/self/gid_map", map);
	/* Nothing done here may reach the node's namespace. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		die("cannot make the namespace private: %s", strerror(errno));
}

/* True when target lies strictly below base. */
static bool below(const char *target, const char *base)
{
	size_t n = strlen(base);

	return !strncmp(target, base, n) && target[n] == '/' && target[n + 1];
}

/* mkdir -p below base (on our tmpfs): components already checked by
 * squashd (absolute, normalised, no "..") */
static void make_dirs(const char *path)
{
	char buf[SQUASH_PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			die("cannot create %s: %s", buf, strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		die("cannot create %s: %s", buf, strerror(errno));
}

static void bind_images(const Squash__Response *resp, const char *base)
{
	bool base_done = false;
	char src[PATH_MAX + 16], b1[SQUASH_PATH_MAX + 64], b2[SQUASH_PATH_MAX + 64];

	for (size_t i = 0; i < resp->n_job_mounts; i++) {
		const char *target = resp->job_mounts[i]->target;

		if (squash_mount_repeats_target(resp, i))
			continue; /* merged with an earlier image: bound there */
		if (below(target, base)) {
			/* Targets below the base are made on a tmpfs of our own. */
			if (!base_done && mount("tmpfs", base, "tmpfs", MS_NOSUID | MS_NODEV,
						"mode=0755,size=1m") < 0)
				die("cannot mount a tmpfs on %s: %s", base, strerror(errno));
			base_done = true;
			make_dirs(target);
		}
		snprintf(src, sizeof(src), "%s/%zu", resp->session_dir, i);
		/* squashd binds it in the node's namespace and nothing of it
		 * propagates (its mount directories are private): seen only
		 * from there, not from a job's or a container's namespace. */
		if (!squash_is_mount_root(AT_FDCWD, src))
			die("cannot see squashd's mount of %s at %s: run squash-shell in the node's own "
			    "mount namespace (on the login node itself, not inside a job or a container)",
			    shown(resp->job_mounts[i]->image, b1, sizeof(b1)), src);
		if (mount(src, target, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
			  NULL) < 0)
			die("cannot mount %s on %s: %s", shown(resp->job_mounts[i]->image, b1, sizeof(b1)),
			    shown(target, b2, sizeof(b2)), strerror(errno));
	}
}

/* The tasks' environment, as in a job (squash_env.h). */
static void export_env(const Squash__Response *resp)
{
	struct squash_task_env env;

	if (squash_task_env_build(resp, &env) < 0)
		die("out of memory");
	for (size_t i = 0; i < SQUASH_TASK_ENV_VARS; i++)
		setenv(env.name[i], env.value[i], 1);
	squash_task_env_free(&env);
}


static int own_setenv(void *ctx, const char *var, const char *value, char *why, size_t whylen)
{
	(void)ctx;
	if ((value ? setenv(var, value, 1) : unsetenv(var)) == 0)
		return 0;
	snprintf(why, whylen, "cannot set %s: %s", var, strerror(errno));
	return -1;
}

/* The images' environments (images_env.h), read from the targets as the
 * caller, after they are bound: the ones env_names gives, else each
 * image's default-env. */
static void apply_image_envs(const Squash__Response *resp, const char *env_names)
{
	const struct squash_env_access env = {
		.option = "--env",
		.images = "given",
		.get = squash_env_own_get,
		.set = own_setenv,
		.notes = stderr,
	};
	char err[2048], b1[sizeof(err) * 4];

	if (squash_images_env_apply(resp, env_names, &env, err, sizeof(err)))
		die("%s", shown(err, b1, sizeof(b1)));
}

/* --env's names checked before anything is mounted. */
static void check_env_names(const char *env_names)
{
	struct squash_env_names *names;
	char why[512], b1[sizeof(why) * 4];

	if (!env_names || !strcmp(env_names, SQUASH_ENV_NAMES_NONE))
		return;
	names = malloc(sizeof(*names));
	if (!names)
		die("out of memory");
	if (squash_env_names_split(env_names, "--env", names, why, sizeof(why)))
		die("%s", shown(why, b1, sizeof(b1)));
	free(names);
}

/* Two images on one default target: refused. The paths are shown whole
 * (their file names are the point), so the buffers are the heap's. */
static void refuse_default_collision(const struct squash_image_spec *earlier,
				     const struct squash_image_spec *later)
{
	size_t len = SQUASH_PATH_MAX * 4;
	char *b1 = malloc(len), *b2 = malloc(len), *b3 = malloc(len);

	if (!b1 || !b2 || !b3)
		die("out of memory");
	die("%s and %s would both be mounted on %s (their default target); give one of them "
	    "another target, or write the same TARGET for both to merge them (IMAGE:TARGET)",
	    shown(earlier->image, b1, len), shown(later->image, b2, len),
	    shown(later->target, b3, len));
}

/* IMAGE:TARGET:rw and :rw=DIR: a writable overlay lives and goes with a
 * job, and a session mounts read-only (squashd's session mount has no
 * overlay), so they are refused rather than quietly mounted read-only. */
static void refuse_writable(const struct squash_image_list *list)
{
	char b1[SQUASH_PATH_MAX * 4];

	for (size_t i = 0; i < list->count; i++)
		if (list->items[i].writable || list->items[i].upper)
			die("%s: cannot use %s here: writable images are for jobs only (sbatch, salloc, "
			    "or an srun that creates the job); squash-shell mounts images read-only",
			    shown(list->items[i].image, b1, sizeof(b1)),
			    list->items[i].upper ? ":rw=DIR" : ":rw");
}

/* The file of a catalog image "@NAME[/VERSION]" (proto/catalog.h), malloc'd,
 * and NAME; dies with the reason (near matches for an unknown name). */
static char *catalog_image(const char *ref, char name[SQUASH_CATALOG_NAME_MAX + 1])
{
	char path[PATH_MAX], why[4096], version[SQUASH_CATALOG_NAME_MAX + 1];
	struct squash_catalogs c;

	if (squash_catalogs_load(NULL, true, &c))
		die("out of memory");
	for (size_t i = 0; i < c.count; i++)
		if (c.items[i].refused && c.items[i].source == SQUASH_CATALOG_SITE)
			fprintf(stderr, "squash-shell: %s\n", c.items[i].problem);
	if (squash_catalogs_resolve(&c, ref, path, sizeof(path), why, sizeof(why)))
		die("%s", why);
	squash_catalogs_free(&c);
	squash_catalog_ref_parse(ref + 1, name, version, NULL, 0); /* resolved: it parses */
	return strdup(path);
}

/* An image that cannot be resolved (errno e); for a path that does not
 * exist and has the shape of NAME/VERSION, the catalogs are read to say
 * whether the '@' was forgotten (catalog.h). */
static void die_missing(const char *image, int e)
{
	char hint[512] = "", b1[SQUASH_PATH_MAX * 4];
	struct squash_catalogs c;

	if (e == ENOENT && squash_catalog_name_shaped(image)) {
		bool loaded = squash_catalogs_load(NULL, true, &c) == 0;

		squash_catalog_missing_hint(loaded ? &c : NULL, image, hint, sizeof(hint));
		squash_catalogs_free(&c);
	}
	die("%s: %s%s", shown(image, b1, sizeof(b1)), strerror(e), hint);
}

/* Resolves each image and fills in the default targets, as at submission
 * (spank/submit_check.c), which also refuses two images whose default
 * targets are the same: merging is asked for by naming one TARGET, never
 * by two images that happen to share a file name. */
static void resolve_images(struct squash_image_list *list, const char *base)
{
	char target[SQUASH_PATH_MAX], why[512], b1[SQUASH_PATH_MAX * 4], b2[SQUASH_PATH_MAX * 4];
	bool *defaulted = calloc(list->count ? list->count : 1, sizeof(*defaulted));

	if (!defaulted)
		die("out of memory");
	for (size_t i = 0; i < list->count; i++) {
		struct squash_image_spec *item = &list->items[i];
		/* "@NAME[/VERSION]": the catalog's file, mounted at BASE/NAME. */
		char name[SQUASH_CATALOG_NAME_MAX + 1] = "";
		char *abs;

		/* squashd would refuse it too, without knowing it was a catalog
		 * image's: said here with what to write instead. */
		if (squash_catalog_is_ref(item->image) && *squash_catalog_target_hint(item->target))
			die("%s: target '%s' is not an absolute path%s", shown(item->image, b1, sizeof(b1)),
			    shown(item->target, b2, sizeof(b2)), squash_catalog_target_hint(item->target));
		abs = squash_catalog_is_ref(item->image) ? catalog_image(item->image, name)
							 : realpath(item->image, NULL);

		if (!abs)
			die_missing(item->image, errno);
		free(item->image);
		item->image = abs;
		if (item->target)
			continue;
		if (squash_default_target(name[0] ? name : abs, base, target, sizeof(target), why,
					  sizeof(why)))
			die("%s: %s", shown(abs, b1, sizeof(b1)), why);
		item->target = strdup(target);
		if (!item->target)
			die("out of memory");
		defaulted[i] = true;
	}
	for (size_t i = 0; i < list->count; i++)
		for (size_t j = 0; j < i; j++)
			if ((defaulted[i] || defaulted[j]) &&
			    !strcmp(list->items[i].target, list->items[j].target))
				refuse_default_collision(&list->items[j], &list->items[i]);
	free(defaulted);
}

/* The base of default targets: squashd's base_dir, which jobs' default
 * targets follow too, from its status (open to anyone). A squashd that
 * does not report its settings (0.1.0) gets the compiled-in default. */
static void site_base(const struct squash_client_options *opts, char *base, size_t len)
{
	Squash__StatusRequest status = SQUASH__STATUS_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__Response *resp = NULL;
	char err[1024], b1[SQUASH_PATH_MAX * 4];

	req.op_case = SQUASH__REQUEST__OP_STATUS;
	req.status = &status;
	if (squash_client_call(opts, &req, &resp, err, sizeof(err)) < 0)
		die("%s", err);
	if (resp->status != SQUASH__STATUS__OK)
		die("%s", resp->message ? shown(resp->message, b1, sizeof(b1))
					: squash_status_name(resp->status));
	snprintf(base, len, "%s", SQUASH_DEFAULT_BASE);
	for (size_t i = 0; resp->node && i < resp->node->n_settings; i++)
		if (!strcmp(resp->node->settings[i]->key, "base_dir") &&
		    strlen(resp->node->settings[i]->value) < len)
			snprintf(base, len, "%s", resp->node->settings[i]->value);
	squash__response__free_unpacked(resp, NULL);
}

static Squash__Response *ask_squashd(const struct squash_client_options *opts,
				     const struct squash_image_list *list)
{
	/* Heap, not stack: up to SQUASH_MAX_IMAGES of each. */
	Squash__ImageSpec *specs = calloc(list->count ? list->count : 1, sizeof(*specs));
	Squash__ImageSpec **ptrs = calloc(list->count ? list->count : 1, sizeof(*ptrs));
	Squash__SessionMountRequest session = SQUASH__SESSION_MOUNT_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__Response *resp = NULL;
	char err[1024], b1[SQUASH_PATH_MAX * 4];

	if (!specs || !ptrs)
		die("out of memory");
	for (size_t i = 0; i < list->count; i++) {
		squash__image_spec__init(&specs[i]);
		specs[i].image = list->items[i].image;
		specs[i].target = list->items[i].target;
		ptrs[i] = &specs[i];
	}
	session.n_images = list->count;
	session.images = ptrs;
	req.op_case = SQUASH__REQUEST__OP_SESSION_MOUNT;
	req.session_mount = &session;
	if (squash_client_call(opts, &req, &resp, err, sizeof(err)) < 0)
		die("%s", err);
	free(ptrs);
	free(specs);
	if (resp->status != SQUASH__STATUS__OK)
		die("%s", resp->message ? shown(resp->message, b1, sizeof(b1))
					: squash_status_name(resp->status));
	if (!resp->session_dir || resp->session_dir[0] != '/' || resp->n_job_mounts != list->count)
		die("squashd gave an answer this squash-shell does not understand");
	return resp;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"socket", required_argument, NULL, 's'},
		{"munge-socket", required_argument, NULL, 'm'},
		{"no-munge", no_argument, NULL, 'n'},
		{"base", required_argument, NULL, 'b'},
		{"env", required_argument, NULL, 'e'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct squash_client_options opts = {
		.socket_path = getenv("SQUASH_SOCKET"),
		.use_munge = true, .munge_if_present = true,
		.munge_socket = getenv("SQUASH_MUNGE_SOCKET"),
		.timeout_ms = 60000,
	};
	const char *base = NULL; /* --base; else squashd's base_dir */
	const char *env_names = NULL; /* --env; else the default-envs */
	char site_base_dir[SQUASH_PATH_MAX];
	/* Heap, not stack: room for SQUASH_MAX_IMAGES items. */
	struct squash_image_list *list = malloc(sizeof(*list));
	char why[512], b1[SQUASH_OPTION_MAX / 16];
	int opt, status;

	while ((opt = getopt_long(argc, argv, "+s:m:nb:e:h", options, NULL)) != -1) {
		switch (opt) {
		case 's': opts.socket_path = optarg; break;
		case 'm': opts.munge_socket = optarg; break;
		case 'n': opts.use_munge = false; break;
		case 'b': base = optarg; break;
		case 'e': env_names = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 125;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 125;
	}
	if (!list)
		die("out of memory");
	if (base && (base[0] != '/' || squash_is_system_path(base)))
		die("--base %s: not an absolute, non-system directory", shown(base, b1, sizeof(b1)));
	if (squash_imagespec_parse(argv[optind], list, why, sizeof(why)))
		die("%s: %s", shown(argv[optind], b1, sizeof(b1)), why);
	refuse_writable(list);
	check_env_names(env_names);
	/* Globs as at submission (image_glob.h); no % patterns here. */
	if (squash_image_globs_expand(list, NULL, b1, sizeof(b1)))
		die("%s", b1);
	optind++;
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;

	if (!base) {
		site_base(&opts, site_base_dir, sizeof(site_base_dir));
		base = site_base_dir;
	}
	resolve_images(list, base);
	Squash__Response *resp = ask_squashd(&opts, list);
	uid_t uid = getuid();
	gid_t gid = getgid();
	pid_t parent = getpid();
	pid_t child = fork();

	if (child < 0)
		die("fork: %s", strerror(errno));
	if (child == 0) {
		/* The images are ours only while the parent lives (squashd
		 * watches it): go with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(125);
		private_namespace(uid, gid);
		bind_images(resp, base);
		export_env(resp);
		apply_image_envs(resp, env_names);
		if (optind < argc) {
			execvp(argv[optind], argv + optind);
			die_status = errno == ENOENT ? 127 : 126;
			die("%s: %s", shown(argv[optind], b1, sizeof(b1)), strerror(errno));
		}
		const char *shell = getenv("SHELL");
		if (!shell || !*shell)
			shell = "/bin/sh";
		execl(shell, shell, (char *)NULL);
		die_status = errno == ENOENT ? 127 : 126;
		die("%s: %s", shown(shell, b1, sizeof(b1)), strerror(errno));
	}
	/* The terminal's signals are the command's; the parent only waits. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	squash__response__free_unpacked(resp, NULL);
	squash_imagespec_free(list);
	free(list);
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
