/* squash-images publish: copies an image into a catalog directory as
 * NAME/VERSION.sqfs and adds its line to the index. Under an exclusive lock
 * on the catalog's .index.lock; the image is copied to a temporary file and
 * linked to its name (never over an existing file), the index written to a
 * temporary file and renamed over the old one, so readers see the old index
 * or the new one, never a part. A NAME/VERSION already published is never
 * replaced: publish a new version. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "errmsg.h"
#include "read_full.h"
#include "superblock.h"
#include "image_meta.h"
#include "cli/image_meta_show.h"
#include "cli/json_escape.h"
#include "cli/squash_images.h"

#define LOCK_FILE ".index.lock"

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Says why publishing stops; returns the exit status, 1. */
static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "squash-images: publish: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* A variable an environment of meta sets that jobs refuse (a default
 * environment's LD_* too: applied without the user naming it), as
 * "line L: environment E sets V: why"; 0 when there is none. */
static int env_refused(const struct squash_image_meta *meta, char *why, size_t len)
{
	for (size_t i = 0; i < meta->n_env; i++) {
		const struct squash_env_line *e = &meta->env[i];
		bool by_default = meta->default_env && !strcmp(e->env, meta->default_env);
		const char *refusal = squash_env_var_refusal(e->var, !by_default);

		if (refusal) {
			snprintf(why, len, "line %u: environment %s sets %s: %s", e->line, e->env, e->var,
				 refusal);
			return -1;
		}
	}
	return 0;
}

/* What publish takes from the image's own metadata: its description when
 * none is given (an explicit one wins; one the index cannot hold is left
 * out, with a warning), and a warning when it names the image otherwise
 * than NAME/VERSION (published all the same: a site may rename, but a
 * mismatch is more often the wrong file). *description: malloc'd or NULL. */
static void take_from_meta(const struct publish_request *req, const struct squash_image_meta *meta,
			   const struct squash_catalog_entry *e, char **description)
{
	const char *d = meta->description;

	bool uenv = !strcmp(meta->file, SQUASH_UENV_META_PATH);

	if ((meta->name && strcmp(meta->name, e->name)) ||
	    (meta->version && strcmp(meta->version, e->version)))
		fprintf(stderr, "squash-images: publish: warning: the metadata of %s names it %s%s%s%s, "
			"but it is published as @%s/%s: check that it is the image you meant%s%s%s%s%s\n",
			req->image, meta->name ? meta->name : "",
			meta->name && meta->version ? ", " : "", meta->version ? "version " : "",
			meta->version ? meta->version : "", e->name, e->version,
			uenv ? "" : " (squash-pack --name ", uenv ? "" : e->name, uenv ? "" : " --version ",
			uenv ? "" : e->version, uenv ? "" : " makes them agree)");
	if (req->description || !d || !*d)
		return;
	if (strlen(d) > SQUASH_IMAGES_DESCRIPTION_MAX || squash_has_control_char(d))
		fprintf(stderr, "squash-images: publish: warning: the description in the metadata of %s "
			"is not used: %s %d bytes; give one with --description\n", req->image,
			squash_has_control_char(d) ? "it holds a tab (or a control character): the index "
			"takes one line without them, of at most" : "it is longer than the index's",
			SQUASH_IMAGES_DESCRIPTION_MAX);
	else if (!(*description = strdup(d)))
		fprintf(stderr, "squash-images: publish: warning: out of memory: published without the "
			"metadata's description\n");
}

/* Jobs read an image's metadata at every task (proto/images_env.c): one
 * they fail on (it does not parse, or an environment sets what they
 * refuse) is not published. An image packed for another place than
 * /BASE/NAME, where jobs naming @NAME mount it by default, is published
 * with a warning: the paths squash-pack rewrote in it point to the place
 * it was packed for. Read from src, the descriptor that is copied; what
 * else publish takes from it (take_from_meta) into *description. 0, or the
 * exit status. */
static int check_meta(const struct publish_request *req, int src,
		      const struct squash_catalog_entry *e, char **description)
{
	const char *image = req->image;
	struct squash_image_meta meta;
	char why[1024];
	const char *last;
	bool found;
	int rc = squash_image_meta_read(image, src, &meta, &found, why, sizeof why);

	if (rc == -2)
		return fail("%s (every job using the image would fail: pack it again)", why);
	if (rc < 0) {
		fprintf(stderr, "squash-images: publish: warning: metadata not checked: %s\n", why);
		return 0;
	}
	if (!found)
		return 0;
	if (env_refused(&meta, why, sizeof why)) {
		squash_image_meta_free(&meta);
		return fail("%s: /.squash/meta %s (jobs using that environment would fail: pack it again)",
			    image, why);
	}
	last = meta.target ? strrchr(meta.target, '/') : NULL;
	if (last && strcmp(last + 1, e->name) && !strcmp(meta.file, SQUASH_UENV_META_PATH))
		fprintf(stderr,
			"squash-images: publish: warning: %s was built for %s (its /%s), but jobs naming "
			"@%s mount it at /squash/%s (or BASE/%s where the site sets another base): paths "
			"inside it may point to %s. Users give the target, @%s/%s:%s, where the site "
			"allows it (allowed_targets = ...:=%s)\n",
			image, meta.target, meta.file, e->name, e->name, e->name, meta.target, e->name,
			e->version, meta.target, meta.target);
	else if (last && strcmp(last + 1, e->name))
		fprintf(stderr,
			"squash-images: publish: warning: %s was packed for %s, but jobs naming @%s "
			"mount it at /squash/%s (or BASE/%s where the site sets another base): paths "
			"squash-pack rewrote in it point to %s. Pack it again with --target "
			"/squash/%s, or users must give the target: @%s/%s:%s\n",
			image, meta.target, e->name, e->name, e->name, meta.target, e->name, e->name,
			e->version, meta.target);
	take_from_meta(req, &meta, e, description);
	squash_image_meta_free(&meta);
	return 0;
}

/* Creates dir (not its parents) readable by all, whatever the umask; an
 * existing one is left as it is. */
static int make_dir(const char *dir)
{
	if (mkdir(dir, 0755) == 0 ? chmod(dir, 0755) != 0 : errno != EEXIST)
		return fail("%s: %s", dir, strerror(errno));
	return 0;
}

/* The catalog to publish into: --catalog, else the site's first trusted
 * one (root) or the user's; created when missing (not its parents). */
static int choose_catalog(const struct publish_request *req, char *out, size_t outlen)
{
	struct squash_catalogs c;
	char why[1024];

	if (req->catalog || geteuid() != 0) {
		if (req->catalog)
			snprintf(out, outlen, "%s", req->catalog);
		else if (squash_catalog_user_dir(out, outlen, why, sizeof why))
			return fail("%s", why);
		return make_dir(out);
	}
	if (squash_catalogs_load(NULL, false, &c))
		return fail("out of memory");
	if (c.count == 0) {
		fail("%s; give one with --catalog DIR",
		     c.conf_problem ? c.conf_problem : "no site catalog in " SQUASH_CATALOG_CONF);
		squash_catalogs_free(&c);
		return 1;
	}
	for (size_t i = 0; i < c.count; i++)
		if (!c.items[i].refused) {
			snprintf(out, outlen, "%s", c.items[i].dir);
			squash_catalogs_free(&c);
			return 0;
		}
	fail("%s; give a trusted one with --catalog DIR", c.items[0].problem);
	squash_catalogs_free(&c);
	return 1;
}

/* The index's bytes (empty when it does not exist), malloc'd in *text. */
static int read_index(const char *path, char **text, size_t *len)
{
	struct stat st;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	*len = 0;
	*text = NULL;
	if (fd < 0 && errno == ENOENT)
		return (*text = calloc(1, 1)) ? 0 : fail("out of memory");
	if (fd < 0 || fstat(fd, &st) != 0) {
		fail("%s: %s", path, strerror(errno));
		goto bad;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)SQUASH_CATALOG_INDEX_MAX) {
		fail("%s: %s", path, S_ISREG(st.st_mode) ? "too large" : "not a regular file");
		goto bad;
	}
	if (!(*text = malloc((size_t)st.st_size + 1)) ||
	    (got = squash_read_full(fd, *text, (size_t)st.st_size, 0)) < 0) {
		fail("%s: cannot read: %s", path, *text ? strerror(errno) : "out of memory");
		goto bad;
	}
	*len = (size_t)got;
	close(fd);
	return 0;
bad:
	free(*text);
	*text = NULL;
	if (fd >= 0)
		close(fd);
	return 1;
}

/* Writes len bytes of buf to fd; -1 with errno. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Copies src into a new file at dst (never replacing one), mode 0644. */
static int copy_image(int src, const char *dir, const char *dst)
{
	char tmp[PATH_MAX + 32], buf[1 << 16];
	struct squash_superblock sb;
	char why[512];
	int out, rc = 1;
	ssize_t n;
	off_t at = 0;

	snprintf(tmp, sizeof tmp, "%s/.publish.XXXXXX", dir);
	out = mkstemp(tmp);
	if (out < 0)
		return fail("%s: %s", dir, strerror(errno));
	while ((n = pread(src, buf, sizeof buf, at)) > 0 && write_all(out, buf, (size_t)n) == 0)
		at += n;
	if (n != 0)
		fail("copying into %s: %s", tmp, strerror(errno));
	else if (squash_superblock_check_fd(out, SQUASH_READER_ANY, &sb, why, sizeof why))
		fail("the copy %s: %s", tmp, why);
	else if (fchmod(out, 0644) || fsync(out))
		fail("%s: %s", tmp, strerror(errno));
	else if (link(tmp, dst) != 0)
		fail("%s: %s", dst, errno == EEXIST ? "exists already (not in the index: remove it, or "
		     "publish another version)" : strerror(errno));
	else
		rc = 0;
	close(out);
	unlink(tmp);
	return rc;
}

/* Writes text + line as the catalog's new index (temporary file, rename). */
static int write_index(const char *dir, const char *index, const char *text, size_t len,
		       const char *line)
{
	char tmp[PATH_MAX + 32];
	int fd, rc = 1;

	snprintf(tmp, sizeof tmp, "%s/.index.XXXXXX", dir);
	fd = mkstemp(tmp);
	if (fd < 0)
		return fail("%s: %s", dir, strerror(errno));
	if (write_all(fd, text, len) || (len && text[len - 1] != '\n' && write_all(fd, "\n", 1)) ||
	    write_all(fd, line, strlen(line)) || fchmod(fd, 0644) || fsync(fd) || rename(tmp, index))
		fail("%s: %s", index, strerror(errno));
	else
		rc = 0;
	close(fd);
	if (rc)
		unlink(tmp);
	return rc;
}

/* With the lock held: checks the index, copies the image in, writes the
 * new index. */
static int publish_locked(const struct publish_request *req, int src, const char *dir,
			  struct squash_catalog_entry *e)
{
	char index[PATH_MAX + 16], dst[PATH_MAX * 2], why[1024], *text = NULL, *line = NULL;
	struct squash_catalog_index parsed;
	size_t len;
	int rc = 1;

	snprintf(index, sizeof index, "%s/%s", dir, SQUASH_CATALOG_INDEX_FILE);
	if (read_index(index, &text, &len))
		return 1;
	if (squash_catalog_index_parse(text, len, index, &parsed, why, sizeof why)) {
		free(text);
		return fail("%s (fix the index first)", why);
	}
	if (squash_catalog_index_find(&parsed, e->name, e->version)) {
		fail("%s/%s is published already: a published version never changes (publish another "
		     "version)", e->name, e->version);
		goto out;
	}
	snprintf(dst, sizeof dst, "%s/%s", dir, e->name);
	if (make_dir(dst))
		goto out;
	snprintf(dst, sizeof dst, "%s/%s", dir, e->file);
	if (!(line = squash_catalog_index_line(e)) || strlen(line) >= SQUASH_CATALOG_LINE_MAX) {
		fail("%s", line ? "the index line would be too long" : "out of memory");
		goto out;
	}
	if (copy_image(src, dir, dst))
		goto out;
	if (write_index(dir, index, text, len, line)) {
		unlink(dst);
		goto out;
	}
	rc = 0;
	if (req->json) {
		printf("{\"reference\":\"@%s/%s\",\"catalog\":", e->name, e->version);
		json_write_string(stdout, dir);
		printf(",\"file\":");
		json_write_string(stdout, dst);
		printf("}\n");
	} else {
		printf("published @%s/%s as %s\n", e->name, e->version, dst);
	}
out:
	free(line);
	free(text);
	squash_catalog_index_free(&parsed);
	return rc;
}

int squash_images_publish(const struct publish_request *req)
{
	struct squash_catalog_entry e = { 0 };
	char dir[PATH_MAX], lock[PATH_MAX + 16], file[2 * SQUASH_CATALOG_NAME_MAX + 8], why[1024];
	struct squash_superblock sb;
	const char *desc = req->description ? req->description : "";
	char *meta_description = NULL;
	int src, lockfd = -1, rc = 1;

	if (squash_catalog_ref_parse(req->reference, e.name, e.version, why, sizeof why))
		return fail("%s: %s (the form is NAME/VERSION)", req->reference, why);
	if (!e.version[0])
		return fail("%s: give NAME/VERSION: a version is needed", req->reference);
	if (strlen(desc) > SQUASH_IMAGES_DESCRIPTION_MAX || squash_has_control_char(desc))
		return fail("the description must be one line of at most %d bytes",
			    SQUASH_IMAGES_DESCRIPTION_MAX);
	snprintf(file, sizeof file, "%s/%s.sqfs", e.name, e.version);
	e.file = file;
	e.description = (char *)desc;
	src = open(req->image, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (src < 0)
		return fail("%s: %s", req->image, strerror(errno));
	if (squash_superblock_check_fd(src, SQUASH_READER_ANY, &sb, why, sizeof why)) {
		fail("%s: %s", req->image, why);
		goto out;
	}
	if (check_meta(req, src, &e, &meta_description) || choose_catalog(req, dir, sizeof dir))
		goto out;
	if (meta_description)
		e.description = meta_description;
	/* Root writes only where no user can: a user's directory could lead
	 * root's files elsewhere through links. */
	if (geteuid() == 0 && squash_catalog_trusted(dir, false, why, sizeof why)) {
		fail("%s is not a catalog root may publish into: %s (a site catalog and every "
		     "directory above it must be root's and writable by nobody else)", dir, why);
		goto out;
	}
	snprintf(lock, sizeof lock, "%s/%s", dir, LOCK_FILE);
	lockfd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (lockfd < 0 || flock(lockfd, LOCK_EX) != 0) {
		fail("cannot lock %s: %s", lock, strerror(errno));
		goto out;
	}
	rc = publish_locked(req, src, dir, &e);
out:
	if (lockfd >= 0)
		close(lockfd);
	close(src);
	free(meta_description);
	return rc;
}
