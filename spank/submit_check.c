/* Submit-time check of --squash-image (see submit_check.h). squashd checks
 * everything again with the job user's identity; this check exists so that
 * mistakes are reported at once, on the submitter's terminal. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_image.h"
#include "errmsg.h"
#include "image_glob.h"
#include "imagespec.h"
#include "path_pattern.h"
#include "quote.h"
#include "squash_env.h"
#include "submit_check.h"
#include "superblock.h"
#include "user_fuse.h"
#include "target.h"

/* What the check learnt about one item: fields that use %a %A or %j stay
 * patterns until the prolog knows the job; the others are plain paths by
 * the end of the check. */
struct item_state {
	bool image_deferred;
	bool target_deferred;
	bool target_default; /* derived from the image's name, not written */
	char catalog_name[SQUASH_CATALOG_NAME_MAX + 1]; /* "@NAME": NAME, the default target's */
};

/* The submitter's name, for %u (the job runs as the submitter). */
static const char *user_name(void)
{
	static char name[256];
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (!name[0] && getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) == 0 && res &&
	    strlen(res->pw_name) < sizeof name)
		strcpy(name, res->pw_name);
	return name[0] ? name : NULL;
}

/* Values for expanding what is known at submit: %u and %%. */
static const struct squash_pattern_values *submit_values(void)
{
	static struct squash_pattern_values v;

	v.have_job = false;
	v.user = user_name();
	return &v;
}

/* Stand-in values for checking a deferred target's shape at submit. */
static const struct squash_pattern_values *sample_values(void)
{
	static struct squash_pattern_values v;

	v.have_job = true;
	v.is_array = true;
	v.job_id = 1;
	v.array_job_id = 1;
	v.array_task_id = 0;
	v.user = user_name();
	return &v;
}

/* Replaces *field by its expansion with what is known now. */
static int expand_now(const char *image, char **field)
{
	char buf[SQUASH_PATH_MAX], why[512];
	char *copy;

	if (!strchr(*field, '%'))
		return 0;
	if (squash_pattern_expand(*field, submit_values(), buf, sizeof buf, why, sizeof why)) {
		slurm_error("squash: %s: %s", image, why);
		return -1;
	}
	copy = strdup(buf);
	if (!copy) {
		slurm_error("squash: out of memory");
		return -1;
	}
	free(*field);
	*field = copy;
	return 0;
}

static int check_pattern_syntax(const char *image, const char *field)
{
	char why[1024];

	if (field && squash_pattern_check(field, why, sizeof why)) {
		slurm_error("squash: %s: %s", image, why);
		return -1;
	}
	return 0;
}

/* Makes a deferred image absolute: against the working directory, with
 * the directory resolved when it holds no pattern (so a missing directory
 * is reported now). The file itself is checked by squashd per task. */
static int absolute_pattern(struct squash_image_spec *item)
{
	char *slash = strrchr(item->image, '/');
	char *dir = NULL, *abs = NULL;
	const char *name = slash ? slash + 1 : item->image;
	size_t len;

	if (slash && slash == item->image)
		dir = strdup("/");
	else if (slash)
		dir = strndup(item->image, (size_t)(slash - item->image));
	else
		dir = strdup(".");
	if (!dir)
		goto oom;
	if (!strchr(dir, '%')) {
		abs = realpath(dir, NULL);
		if (!abs) {
			slurm_error("squash: %s: directory %s: %s", item->image, dir, strerror(errno));
			free(dir);
			return -1;
		}
	} else if (dir[0] == '/') {
		abs = strdup(dir);
	} else {
		char cwd[PATH_MAX];

		if (!getcwd(cwd, sizeof cwd)) {
			slurm_error("squash: %s: cannot tell the working directory: %s",
				    item->image, strerror(errno));
			free(dir);
			return -1;
		}
		len = strlen(cwd) + 1 + strlen(dir) + 1;
		abs = malloc(len);
		if (abs)
			snprintf(abs, len, "%s/%s", cwd, dir);
	}
	free(dir);
	if (!abs)
		goto oom;
	len = strlen(abs) + 1 + strlen(name) + 1;
	dir = malloc(len);
	if (!dir) {
		free(abs);
		goto oom;
	}
	snprintf(dir, len, "%s%s%s", abs, strcmp(abs, "/") ? "/" : "", name);
	free(abs);
	free(item->image);
	item->image = dir;
	return 0;
oom:
	slurm_error("squash: out of memory");
	return -1;
}

/* Resolves the image against the working directory and replaces it with
 * the absolute path. split_nearby: the option had a ',' or ':' next to this
 * path, so a missing file may be a path cut at an unescaped ',' or ':'. */
static int resolve_image(struct squash_image_spec *item, bool split_nearby)
{
	char *abs = realpath(item->image, NULL);

	if (!abs) {
		submit_image_missing(item->image, errno, split_nearby);
		return -1;
	}
	/* A symlink may lead to a name that must not reach a terminal. */
	if (squash_has_control_char(abs)) {
		char shown[SQUASH_QUOTE_BUF];

		slurm_error("squash: %s: its real path '%s' contains a control character; rename the file",
			    item->image, squash_quote(shown, sizeof shown, abs, strlen(abs)));
		free(abs);
		return -1;
	}
	free(item->image);
	item->image = abs;
	return 0;
}

/* Resolves the upper directory of IMAGE:TARGET:rw=DIR like the image and
 * checks it is a directory of the user's (squashd checks again). */
static int resolve_upper(struct squash_image_spec *item)
{
	struct stat st;
	char *abs = realpath(item->upper, NULL);

	if (!abs || stat(abs, &st) != 0) {
		char shown[SQUASH_QUOTE_BUF];

		slurm_error("squash: %s: upper directory %s: %s (create it first)", item->image,
			    squash_quote(shown, sizeof shown, item->upper, strlen(item->upper)),
			    strerror(errno));
		free(abs);
		return -1;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || squash_has_control_char(abs)) {
		char shown[SQUASH_QUOTE_BUF];

		slurm_error("squash: %s: upper directory %s: %s", item->image,
			    squash_quote(shown, sizeof shown, abs, strlen(abs)),
			    !S_ISDIR(st.st_mode) ? "not a directory" :
			    st.st_uid != getuid() ? "not yours (it must be a directory you own)" :
			    "its real path contains a control character; rename it");
		free(abs);
		return -1;
	}
	free(item->upper);
	item->upper = abs;
	return 0;
}

/* Opens the image as the user (this runs as the user) and checks it is a
 * regular file with a sane squashfs superblock. */
static int check_image(const char *image)
{
	char why[1024]; /* a user-FUSE refusal names the stacked mounts on the way */
	struct stat st;
	int fd, rc = -1;

	/* squashd refuses these (user_fuse.h): say so before the job queues. */
	if (squash_user_fuse_path(image, why, sizeof(why))) {
		slurm_error("squash: %s: %s", image, why);
		return -1;
	}
	/* O_NONBLOCK: a FIFO planted in place of the image must not hang us. */
	fd = open(image, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		slurm_error("squash: %s: cannot open: %s", image, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0)
		slurm_error("squash: %s: cannot stat: %s", image, strerror(errno));
	else if (S_ISDIR(st.st_mode))
		slurm_error("squash: %s: is a directory, not a squashfs image", image);
	else if (!S_ISREG(st.st_mode))
		slurm_error("squash: %s: not a regular file", image);
	else if (squash_superblock_check_fd(fd, SQUASH_READER_ANY, NULL, why, sizeof why))
		slurm_error("squash: %s: %s", image, why);
	else
		rc = 0;
	close(fd);
	return rc;
}

/* Fills in a missing target and checks it against the allowed prefixes (a
 * deferred one in the shape of a stand-in task's). */
static int check_target(struct squash_image_spec *item, struct item_state *st,
			const struct squash_settings *s)
{
	char why[1024], sample[SQUASH_PATH_MAX];
	const char *checked;

	if (!item->target) {
		char buf[SQUASH_PATH_MAX];

		if (squash_default_target(st->catalog_name[0] ? st->catalog_name : item->image,
					  s->default_target, buf, sizeof buf, why, sizeof why)) {
			slurm_error("squash: %s: %s", item->image, why);
			return -1;
		}
		item->target = strdup(buf);
		if (!item->target) {
			slurm_error("squash: out of memory");
			return -1;
		}
		st->target_deferred = st->image_deferred;
		st->target_default = true;
	}
	checked = item->target;
	if (st->target_deferred) {
		if (squash_pattern_expand(item->target, sample_values(), sample,
					  sizeof sample, why, sizeof why)) {
			slurm_error("squash: %s: %s", item->image, why);
			return -1;
		}
		checked = sample;
	}
	if (squash_target_check(checked, &s->allowed, why, sizeof why)) {
		slurm_error("squash: %s: %s%s%s", item->image, why, st->target_deferred ? " (checked with "
			    "%a=0, %A=%j=1)" : "", st->catalog_name[0] ? squash_catalog_target_hint(checked) : "");
		return -1;
	}
	return 0;
}

/* Readies one item: pattern syntax, plain paths resolved and checked,
 * deferred ones made absolute, targets filled in and checked. */
static int check_item(struct squash_image_spec *item, struct item_state *st,
		      bool split_nearby, const struct squash_settings *s)
{
	if (check_pattern_syntax(item->image, item->image) ||
	    check_pattern_syntax(item->image, item->target))
		return -1;
	st->image_deferred = squash_pattern_needs_job(item->image);
	st->target_deferred = item->target && squash_pattern_needs_job(item->target);
	if (st->image_deferred) { /* never "@NAME": names hold no '%' */
		if (absolute_pattern(item))
			return -1;
	} else if ((squash_catalog_is_ref(item->image) ? submit_catalog_image(item, st->catalog_name)
		    : expand_now(item->image, &item->image) || resolve_image(item, split_nearby)) ||
		   check_image(item->image)) {
		return -1;
	}
	if (item->target && !st->target_deferred &&
	    expand_now(item->image, &item->target))
		return -1;
	return check_target(item, st, s);
}

/* Globs in image paths, expanded here, as the user (image_glob.h). */
static int expand_globs(struct squash_image_list *list)
{
	char why[SQUASH_PATH_MAX + 512];

	if (squash_image_globs_expand(list, submit_values(), why, sizeof why) == 0)
		return 0;
	slurm_error("squash: %s", why);
	return -1;
}

/* One target inside another, or :rw in a merge group (shared rule: target.c). */
static int check_overlaps(const struct squash_image_list *list,
			  const struct item_state *st)
{
	char why[1024];
	char (*sample)[SQUASH_PATH_MAX] = calloc(list->count, SQUASH_PATH_MAX);
	int rc = 0;

	if (!sample) {
		slurm_error("squash: out of memory");
		return -1;
	}
	for (size_t i = 0; i < list->count; i++)
		if (!st[i].target_deferred ||
		    squash_pattern_expand(list->items[i].target, sample_values(),
					  sample[i], SQUASH_PATH_MAX, NULL, 0))
			snprintf(sample[i], SQUASH_PATH_MAX, "%s", list->items[i].target);
	for (size_t i = 0; i < list->count && rc == 0; i++)
		for (size_t j = 0; j < i && rc == 0; j++)
			if ((st[i].target_default || st[j].target_default) &&
			    !strcmp(sample[i], sample[j])) {
				/* Merging is asked for by naming one TARGET, never by
				 * two images that happen to share a file name. */
				slurm_error("squash: %s and %s would both be mounted on %s (their default "
					    "target); give one of them another target, or write the same "
					    "TARGET for both to merge them (IMAGE:TARGET)",
					    list->items[j].image, list->items[i].image, sample[i]);
				rc = -1;
			} else if (squash_target_merge_check(list->items[j].image, sample[j],
						      list->items[j].writable,
						      list->items[i].image, sample[i],
						      list->items[i].writable, why, sizeof why)) {
				slurm_error("squash: %s", why);
				rc = -1;
			}
	free(sample);
	return rc;
}

/* What the check learns about each of the list's items, zeroed, or NULL
 * after saying so. */
static struct item_state *new_states(const struct squash_image_list *list)
{
	struct item_state *st = calloc(list->count ? list->count : 1, sizeof(*st));

	if (!st)
		slurm_error("squash: out of memory for checking %zu image(s)", list->count);
	return st;
}

/* Hands the list to the prolog, which sees SPANK_SQUASH_JOB_IMAGES. The prolog
 * expands every path as a pattern, so plain paths go with '%' doubled.
 * srun: srun creating its own allocation, whose step must find the list
 * where no prolog ran (PrologFlags=RunInJob), as a batch step and salloc's
 * sruns do, which Slurm gives SLURM_SPANK_<name>. srun's own environment
 * is what its tasks get. */
static int hand_to_prolog(spank_t sp, const struct squash_image_list *list,
			  const struct item_state *st, bool srun)
{
	/* Heap, not stack: room for SQUASH_MAX_IMAGES items. */
	struct squash_image_list *out = calloc(1, sizeof(*out));
	char why[512];
	char *text = NULL;
	spank_err_t rc = ESPANK_ERROR;

	if (!out)
		goto oom;
	for (size_t i = 0; i < list->count; i++) {
		const struct squash_image_spec *item = &list->items[i];
		struct squash_image_spec *copy = &out->items[i];

		copy->image = st[i].image_deferred ? strdup(item->image)
						   : squash_pattern_escape(item->image);
		copy->target = st[i].target_deferred ? strdup(item->target)
						     : squash_pattern_escape(item->target);
		copy->writable = item->writable;
		copy->upper = item->upper ? strdup(item->upper) : NULL; /* not a pattern */
		out->count++;
		if (!copy->image || !copy->target || (item->upper && !copy->upper))
			goto oom;
	}
	text = squash_imagespec_format(out);
	if (!text)
		goto oom;
	/* What the prolog parses must be what was checked here. */
	squash_imagespec_free(out);
	if (squash_imagespec_parse(text, out, why, sizeof why)) {
		slurm_error("squash: cannot pass the image list to the job: %s", why);
		goto out;
	}
	rc = spank_job_control_setenv(sp, SQUASH_ENV_JOB_IMAGES, text, 1);
	if (rc != ESPANK_SUCCESS)
		slurm_error("squash: cannot pass the image list to the job: %s",
			    spank_strerror(rc));
	else if (srun && setenv(SQUASH_ENV_JOB_IMAGES_STEP, text, 1) != 0) {
		slurm_error("squash: cannot pass the image list to the job's step: %s",
			    strerror(errno));
		rc = ESPANK_ERROR;
	}
	goto out;
oom:
	slurm_error("squash: out of memory");
out:
	free(text);
	if (out)
		squash_imagespec_free(out);
	free(out);
	return rc == ESPANK_SUCCESS ? 0 : -1;
}

/* Parses the option into list, or tells the user why not. */
static int parse_option(const char *option, struct squash_image_list *list)
{
	char why[1024], shown[SQUASH_QUOTE_BUF];

	if (squash_imagespec_parse(option, list, why, sizeof why) == 0)
		return 0;
	/* The option may hold control characters: never echo it raw. */
	slurm_error("squash: --squash-image=%s: %s",
		    squash_quote(shown, sizeof shown, option, strlen(option)), why);
	return -1;
}

int squash_submit_check(spank_t sp, const char *option,
			const struct squash_settings *s, bool srun)
{
	struct squash_image_list *list;
	struct item_state *st = NULL;
	int rc = -1;

	if (!option)
		return 0;
	list = calloc(1, sizeof(*list)); /* heap: room for SQUASH_MAX_IMAGES items */
	if (!list) {
		slurm_error("squash: out of memory");
		return -1;
	}
	if (parse_option(option, list)) {
		free(list);
		return -1;
	}
	if (expand_globs(list) < 0 || !(st = new_states(list)))
		goto out;
	for (size_t i = 0; i < list->count; i++)
		if (check_item(&list->items[i], &st[i],
			       list->count > 1 || list->items[i].target, s) ||
		    (list->items[i].upper && resolve_upper(&list->items[i])))
			goto out;
	if (check_overlaps(list, st) == 0)
		rc = hand_to_prolog(sp, list, st, srun);
out:
	submit_catalogs_done();
	free(st);
	squash_imagespec_free(list);
	free(list);
	return rc;
}

int squash_submit_check_list(const char *option, const struct squash_settings *s,
			     struct squash_image_list *list)
{
	struct item_state *st = NULL;
	int rc = -1;

	if (parse_option(option, list))
		return -1;
	if (expand_globs(list) < 0 || !(st = new_states(list)))
		goto bad;
	for (size_t i = 0; i < list->count; i++) {
		if (check_item(&list->items[i], &st[i], list->count > 1 || list->items[i].target, s))
			goto bad;
		/* A step runs now: nothing is left for a prolog to expand. */
		if (st[i].image_deferred || st[i].target_deferred) {
			slurm_error("squash: %s: %%a, %%A and %%j are for a job's images (sbatch, salloc); "
				    "name an srun step's images plainly", list->items[i].image);
			goto bad;
		}
	}
	rc = check_overlaps(list, st);
bad:
	submit_catalogs_done();
	free(st);
	if (rc)
		squash_imagespec_free(list);
	return rc;
}
