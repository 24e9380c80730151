#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_sites.h"
#include "errmsg.h"
#include "quote.h"
#include "read_full.h"

#define ASK_ADMIN "ask your administrator to make it root's and writable by nobody else"

/* Root's and writable by nobody else; directories above the last may be
 * root-owned and sticky (like /tmp: others cannot rename root's entries). */
static int check_object(const char *path, const struct stat *st, bool last, bool is_file,
			char *err, size_t errlen)
{
	char shown[SQUASH_QUOTE_BUF];
	const char *what = NULL;

	squash_quote(shown, sizeof shown, path, strlen(path));
	if (last && is_file ? !S_ISREG(st->st_mode) : !S_ISDIR(st->st_mode))
		what = last && is_file ? "is not a regular file" : "is not a directory";
	else if (st->st_uid != 0)
		what = "is not owned by root";
	else if ((st->st_mode & 022) && !(!last && (st->st_mode & S_ISVTX)))
		what = st->st_mode & 002 ? "is writable by others" : "is writable by its group";
	if (!what)
		return 0;
	squash_errf(err, errlen, "%s %s (owner uid %u, mode %04o)", shown, what, (unsigned)st->st_uid,
		    (unsigned)(st->st_mode & 07777));
	return -1;
}

/* Every prefix of path ("/", "/a", "/a/b", ...), stat'ed (following links)
 * or lstat'ed, checked as above. */
static int check_prefixes(const char *path, bool follow, bool is_file, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof buf || path[0] != '/') {
		squash_errf(err, errlen, "%.*s: not an absolute path shorter than %d bytes",
			    SQUASH_QUOTE_MAX, path, PATH_MAX);
		return -1;
	}
	for (size_t i = 1; i <= len; i++) {
		struct stat st;
		bool last = i == len;

		if (!last && path[i] != '/')
			continue;
		memcpy(buf, path, i);
		buf[i] = '\0';
		if ((follow ? stat(buf, &st) : lstat(buf, &st)) != 0) {
			squash_errf(err, errlen, "%.*s: %s", SQUASH_QUOTE_MAX, buf, strerror(errno));
			return -1;
		}
		if (check_object(buf, &st, last, is_file, err, errlen))
			return -1;
	}
	return 0;
}

int squash_catalog_trusted(const char *path, bool is_file, char *err, size_t errlen)
{
	struct stat root;
	char *real;
	int rc;

	if (lstat("/", &root) != 0 || check_object("/", &root, false, false, err, errlen))
		return -1;
	/* The names as written (a link met on the way lies in a checked
	 * directory) and the real path (what the links lead to). */
	if (check_prefixes(path, true, is_file, err, errlen))
		return -1;
	real = realpath(path, NULL);
	if (!real) {
		squash_errf(err, errlen, "%.*s: %s", SQUASH_QUOTE_MAX, path, strerror(errno));
		return -1;
	}
	rc = check_prefixes(real, false, is_file, err, errlen);
	free(real);
	return rc;
}

int squash_catalog_conf_parse(const char *text, size_t len, const char *path, char **dirs,
			      size_t *count, char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	unsigned line = 0;

	*count = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end, *s = p, *v;
		char shown[SQUASH_QUOTE_BUF];

		line++;
		p = nl ? nl + 1 : end;
		while (s < eol && (*s == ' ' || *s == '\t'))
			s++;
		while (eol > s && (eol[-1] == ' ' || eol[-1] == '\t' || eol[-1] == '\r'))
			eol--;
		if (s == eol || *s == '#')
			continue;
		for (v = s; v < eol && *v != ' ' && *v != '\t'; v++)
			;
		if ((size_t)(v - s) != 7 || memcmp(s, "catalog", 7)) {
			squash_errf(err, errlen, "%s:%u: unknown setting '%s' (the form is: catalog DIR)",
				    path, line, squash_quote(shown, sizeof shown, s, (size_t)(v - s)));
			goto bad;
		}
		while (v < eol && (*v == ' ' || *v == '\t'))
			v++;
		if (v == eol || *v != '/' || (size_t)(eol - v) >= PATH_MAX) {
			squash_errf(err, errlen, "%s:%u: catalog needs an absolute directory", path, line);
			goto bad;
		}
		for (const char *c = v; c < eol; c++)
			if (squash_is_control((unsigned char)*c)) {
				squash_errf(err, errlen, "%s:%u: the directory holds a control character",
					    path, line);
				goto bad;
			}
		if (*count == SQUASH_CATALOG_SITES_MAX) {
			squash_errf(err, errlen, "%s:%u: more than %d catalogs", path, line,
				    SQUASH_CATALOG_SITES_MAX);
			goto bad;
		}
		dirs[*count] = strndup(v, (size_t)(eol - v));
		if (!dirs[*count]) {
			squash_errf(err, errlen, "out of memory");
			goto bad;
		}
		(*count)++;
	}
	return 0;
bad:
	while (*count > 0)
		free(dirs[--*count]);
	return -1;
}

/* Reads the site file: 1 when it does not exist, -1 with err. */
static int read_conf(const char *path, char **dirs, size_t *count, char *err, size_t errlen)
{
	char text[SQUASH_CATALOG_CONF_MAX];
	struct stat st;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	*count = 0;
	if (fd < 0 && errno == ENOENT)
		return 1;
	if (fd < 0) {
		squash_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
		squash_errf(err, errlen, "%s is not used: it must be a regular file owned by root and "
			    "writable by nobody else; %s", path, ASK_ADMIN);
		close(fd);
		return -1;
	}
	got = squash_read_full(fd, text, sizeof text, 0);
	close(fd);
	if (got < 0 || (size_t)got == sizeof text) {
		squash_errf(err, errlen, "%s: %s", path,
			    got < 0 ? strerror(errno) : "too large (at most 64 KiB)");
		return -1;
	}
	return squash_catalog_conf_parse(text, (size_t)got, path, dirs, count, err, errlen);
}

/* The trust rule for a site catalog's index, on the open descriptor. */
static int index_trusted(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && st.st_uid == 0 && !(st.st_mode & 022))
		return 0;
	squash_errf(err, errlen, "site catalog index %s is not used: it is not root's or others may "
		    "write it; %s", path, ASK_ADMIN);
	return -1;
}

static int set_problem(struct squash_catalog *c, const char *why, bool refused)
{
	c->problem = strdup(why);
	c->refused = refused;
	return c->problem ? 0 : -1;
}

/* Reads the index of c (real_dir set). */
static int load_index(struct squash_catalog *c)
{
	char path[PATH_MAX + 16], why[PATH_MAX + 1024];
	int rc;

	snprintf(path, sizeof path, "%s/%s", c->real_dir, SQUASH_CATALOG_INDEX_FILE);
	rc = squash_catalog_index_read(path, c->source == SQUASH_CATALOG_SITE ? index_trusted : NULL,
				       &c->index, why, sizeof why);
	if (rc == 1)
		c->missing = true;
	if (rc == 1 && c->source == SQUASH_CATALOG_SITE) {
		snprintf(why, sizeof why, "%s: no such file (the site catalog has no index)", path);
		return set_problem(c, why, false);
	}
	return rc < 0 ? set_problem(c, why, false) : 0;
}

static int load_site(struct squash_catalog *c)
{
	char why[PATH_MAX + 512], msg[2 * PATH_MAX + 1024];

	if (squash_catalog_trusted(c->dir, false, why, sizeof why)) {
		snprintf(msg, sizeof msg, "site catalog %s is not used: %s; a site catalog and every "
			 "directory above it must be root's and writable by nobody else (%s)", c->dir,
			 why, "tell your administrator");
		return set_problem(c, msg, true);
	}
	c->real_dir = realpath(c->dir, NULL);
	if (!c->real_dir) {
		snprintf(why, sizeof why, "site catalog %s: %s", c->dir, strerror(errno));
		return set_problem(c, why, false);
	}
	return load_index(c);
}

int squash_catalog_user_dir(char *out, size_t outlen, char *err, size_t errlen)
{
	const char *dir = getenv(SQUASH_CATALOG_USER_ENV);
	const char *home = getenv("HOME");
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (dir && *dir) {
		if (dir[0] != '/' || strlen(dir) >= outlen || squash_has_control_char(dir)) {
			squash_errf(err, errlen, "$%s must be an absolute directory", SQUASH_CATALOG_USER_ENV);
			return -1;
		}
		snprintf(out, outlen, "%s", dir);
		return 0;
	}
	if ((!home || home[0] != '/') && getpwuid_r(getuid(), &pw, buf, sizeof buf, &res) == 0 && res)
		home = res->pw_dir;
	if (!home || home[0] != '/' || squash_has_control_char(home) ||
	    (size_t)snprintf(out, outlen, "%s/%s", home, SQUASH_CATALOG_USER_DEFAULT) >= outlen) {
		squash_errf(err, errlen, "no home directory for a catalog of your own (set $%s)",
			    SQUASH_CATALOG_USER_ENV);
		return -1;
	}
	return 0;
}

static int load_user(struct squash_catalog *c)
{
	char dir[PATH_MAX], why[512];

	c->source = SQUASH_CATALOG_USER;
	if (squash_catalog_user_dir(dir, sizeof dir, why, sizeof why)) {
		/* A bad $SQUASH_USER_CATALOG is the user's to fix: said when
		 * reached; no home directory just means no catalog of one's own. */
		const char *set = getenv(SQUASH_CATALOG_USER_ENV);

		c->missing = true;
		c->dir = strdup(set && *set ? set : "~/" SQUASH_CATALOG_USER_DEFAULT);
		return !c->dir ? -1 : set_problem(c, why, !(set && *set));
	}
	c->dir = strdup(dir);
	c->real_dir = strdup(dir);
	if (!c->dir || !c->real_dir)
		return -1;
	return load_index(c);
}

int squash_catalogs_load(const char *conf, bool with_user, struct squash_catalogs *out)
{
	char *dirs[SQUASH_CATALOG_SITES_MAX];
	char why[PATH_MAX + 512];
	size_t n = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	conf = conf ? conf : SQUASH_CATALOG_CONF;
	rc = read_conf(conf, dirs, &n, why, sizeof why);
	if (rc < 0 && !(out->conf_problem = strdup(why)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct squash_catalog *c = &out->items[out->count++];

		c->source = SQUASH_CATALOG_SITE;
		c->dir = dirs[i];
		dirs[i] = NULL;
		if (load_site(c)) {
			while (++i < n)
				free(dirs[i]);
			return -1;
		}
	}
	if (with_user && load_user(&out->items[out->count++]))
		return -1;
	return 0;
}

void squash_catalogs_free(struct squash_catalogs *c)
{
	for (size_t i = 0; i < c->count; i++) {
		free(c->items[i].dir);
		free(c->items[i].real_dir);
		free(c->items[i].problem);
		squash_catalog_index_free(&c->items[i].index);
	}
	free(c->conf_problem);
	memset(c, 0, sizeof(*c));
}
