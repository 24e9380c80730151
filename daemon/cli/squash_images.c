/* squash-images: lists, finds and inspects the images of the site's
 * catalogs and the user's own (proto/catalog.h), and publishes new ones
 * (squash_images_publish.c). Reads only the catalogs' index files, as the
 * user; needs no daemon. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "quote.h"
#include "superblock.h"
#include "cli/container_root_note.h"
#include "cli/image_meta_show.h"
#include "cli/json_escape.h"
#include "cli/squash_images.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: squash-images COMMAND [--json]\n"
		"Commands:\n"
		"  list                        every image of the site's catalogs and yours\n"
		"  find [TEXT]                 images whose name, version or description holds TEXT\n"
		"                              (without TEXT: every image, as list)\n"
		"  inspect @NAME[/VERSION]     a catalog image (the newest without VERSION) or any\n"
		"  inspect FILE                image file: its record, file, size, squashfs facts,\n"
		"                              metadata and environments\n"
		"  publish IMAGE NAME/VERSION [--catalog DIR] [--description TEXT]\n"
		"                              copy IMAGE into a catalog (root: the site's first,\n"
		"                              others: yours) and add it to the index\n"
		"  activate [IMAGE:]ENV[,...]  print the shell commands that apply these environments\n"
		"                              of the images this job step or squash-shell sees:\n"
		"                              eval \"$(squash-images activate dev)\"\n"
		"Options:\n"
		"  -j, --json                  JSON output\n"
		"  -c, --catalog DIR           publish into DIR\n"
		"  -d, --description TEXT      publish with a one-line description (default: the\n"
		"                              image's own, from its metadata)\n"
		"  -h, --help                  this help\n"
		"Jobs name a catalog image as --squash-image=@NAME or @NAME/VERSION[:TARGET].\n"
		"Site catalogs: " SQUASH_CATALOG_CONF "; yours: $" SQUASH_CATALOG_USER_ENV
		" or ~/" SQUASH_CATALOG_USER_DEFAULT ".\n");
}

static const char *source_name(const struct squash_catalog *c)
{
	return c->source == SQUASH_CATALOG_SITE ? "site" : "user";
}

/* Says why catalogs are not used; true when one could not be read (not a
 * distrusted site catalog, which is skipped). */
static bool report_problems(const struct squash_catalogs *c)
{
	bool failed = false;

	if (c->conf_problem)
		fprintf(stderr, "squash-images: %s\n", c->conf_problem);
	for (size_t i = 0; i < c->count; i++) {
		const struct squash_catalog *cat = &c->items[i];

		if (!cat->problem || (cat->source == SQUASH_CATALOG_USER && cat->refused))
			continue;
		fprintf(stderr, "squash-images: %s\n", cat->problem);
		failed |= !cat->refused;
	}
	return failed;
}

/* Whether e of catalog k is hidden by an earlier catalog's same name. */
static bool shadowed(const struct squash_catalogs *c, size_t k, const struct squash_catalog_entry *e)
{
	for (size_t i = 0; i < k; i++)
		if (!c->items[i].refused && !c->items[i].problem &&
		    squash_catalog_index_find(&c->items[i].index, e->name, NULL))
			return true;
	return false;
}

/* Entries of one catalog in the order shown: by name, newest first. */
static int entry_order(const void *a, const void *b)
{
	const struct squash_catalog_entry *x = *(const struct squash_catalog_entry *const *)a;
	const struct squash_catalog_entry *y = *(const struct squash_catalog_entry *const *)b;
	int by_name = strcmp(x->name, y->name);

	return by_name ? by_name : squash_catalog_version_cmp(y->version, x->version);
}

static bool matches(const struct squash_catalog_entry *e, const char *text)
{
	char both[2 * SQUASH_CATALOG_NAME_MAX + 2];

	if (!text)
		return true;
	snprintf(both, sizeof both, "%s/%s", e->name, e->version);
	return strcasestr(both, text) || strcasestr(e->description, text);
}

static void print_entry_json(const struct squash_catalogs *c, size_t k,
			     const struct squash_catalog_entry *e, bool first)
{
	const struct squash_catalog *cat = &c->items[k];
	char ref[2 * SQUASH_CATALOG_NAME_MAX + 3];
	char path[PATH_MAX * 2];

	snprintf(ref, sizeof ref, "@%s/%s", e->name, e->version);
	snprintf(path, sizeof path, "%s/%s", cat->real_dir, e->file);
	printf("%s{\"reference\":", first ? "" : ",");
	json_write_string(stdout, ref);
	printf(",\"name\":");
	json_write_string(stdout, e->name);
	printf(",\"version\":");
	json_write_string(stdout, e->version);
	printf(",\"source\":\"%s\",\"catalog\":", source_name(cat));
	json_write_string(stdout, cat->dir);
	printf(",\"file\":");
	json_write_string(stdout, path);
	printf(",\"description\":");
	json_write_string(stdout, e->description);
	printf(",\"newest\":%s,\"shadowed\":%s}",
	       squash_catalog_index_find(&cat->index, e->name, NULL) == e ? "true" : "false",
	       shadowed(c, k, e) ? "true" : "false");
}

static void print_catalogs_json(const struct squash_catalogs *c)
{
	printf("\"catalogs\":[");
	for (size_t i = 0; i < c->count; i++) {
		printf("%s{\"source\":\"%s\",\"dir\":", i ? "," : "", source_name(&c->items[i]));
		json_write_string(stdout, c->items[i].dir);
		printf(",\"images\":%zu,\"problem\":", c->items[i].index.count);
		if (c->items[i].problem)
			json_write_string(stdout, c->items[i].problem);
		else
			printf("null");
		printf("}");
	}
	printf("]");
}

/* list (text NULL) and find: the entries that match, catalog by catalog. */
static int show_entries(const struct squash_catalogs *c, const char *text, bool json)
{
	size_t shown = 0;
	char near[512];

	if (json) {
		printf("{");
		print_catalogs_json(c);
		printf(",\"images\":[");
	} else {
		printf("%-40s %-6s %s\n", "IMAGE", "SOURCE", "DESCRIPTION");
	}
	for (size_t k = 0; k < c->count; k++) {
		const struct squash_catalog_index *index = &c->items[k].index;
		const struct squash_catalog_entry **order = calloc(index->count + 1, sizeof(*order));
		size_t n = 0;

		if (!order) {
			fprintf(stderr, "squash-images: out of memory\n");
			return 1;
		}
		for (size_t i = 0; i < index->count; i++)
			if (matches(&index->entries[i], text))
				order[n++] = &index->entries[i];
		qsort(order, n, sizeof(*order), entry_order);
		for (size_t i = 0; i < n; i++, shown++) {
			char ref[2 * SQUASH_CATALOG_NAME_MAX + 3];

			if (json) {
				print_entry_json(c, k, order[i], shown == 0);
				continue;
			}
			snprintf(ref, sizeof ref, "@%s/%s", order[i]->name, order[i]->version);
			printf("%-40s %-6s %s%s\n", ref, source_name(&c->items[k]), order[i]->description,
			       shadowed(c, k, order[i]) ? " (hidden: the site has this name)" : "");
		}
		free(order);
	}
	if (json)
		printf("]}\n");
	if (text && shown == 0 && squash_catalogs_near(c, text, 5, near, sizeof near))
		fprintf(stderr, "squash-images: nothing holds '%s'; did you mean %s?\n", text, near);
	return 0;
}

static void print_facts(const char *path, const struct stat *st, const struct squash_superblock *sb,
			bool json)
{
	char when[64] = "unknown";
	time_t made = (time_t)sb->mkfs_time;
	struct tm tm;

	if (sb->mkfs_time && gmtime_r(&made, &tm))
		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (json) {
		printf("\"file\":");
		json_write_string(stdout, path);
		printf(",\"size\":%lld,\"compression\":\"%s\",\"block_size\":%u,\"inodes\":%u,"
		       "\"created\":\"%s\"", (long long)st->st_size,
		       squash_compression_name(sb->compression), sb->block_size, sb->inodes, when);
		return;
	}
	printf("file:        %s\nsize:        %lld bytes\ncompression: %s\nblock size:  %u\n"
	       "inodes:      %u\ncreated:     %s\n", path, (long long)st->st_size,
	       squash_compression_name(sb->compression), sb->block_size, sb->inodes, when);
}

/* inspect reads the catalogs for a catalog name, and for a missing file
 * only to say whether it names one: a FILE that is there needs none, so a
 * hung catalog file system cannot hold it. */
static int inspect(struct squash_catalogs *c, bool *loaded, const char *what, bool json)
{
	const struct squash_catalog_entry *e = NULL;
	const struct squash_catalog *where = NULL;
	char path[PATH_MAX], why[4096], shown[SQUASH_QUOTE_BUF], hint[512] = "";
	struct squash_superblock sb;
	struct stat st;
	bool has_meta;
	int fd, rc = 1;

	if (squash_catalog_is_ref(what)) {
		char name[SQUASH_CATALOG_NAME_MAX + 1], version[SQUASH_CATALOG_NAME_MAX + 1];

		if (squash_catalog_at_ref_parse(what, name, version, why, sizeof why) ||
		    !(e = squash_catalogs_find(c, name, version, &where, why, sizeof why)) ||
		    squash_catalog_entry_path(where, e, path, sizeof path, why, sizeof why)) {
			fprintf(stderr, "squash-images: %s: %s\n",
				squash_quote(shown, sizeof shown, what, strlen(what)), why);
			return 1;
		}
	} else if ((size_t)snprintf(path, sizeof path, "%s", what) >= sizeof path) {
		fprintf(stderr, "squash-images: the path is too long\n");
		return 1;
	}
	squash_quote(shown, sizeof shown, path, strlen(path));
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		int open_errno = errno;

		/* NAME/VERSION without its '@', the way uenv names images. */
		if (open_errno == ENOENT && !e) {
			if (!*loaded && squash_catalog_name_shaped(what)) {
				if (squash_catalogs_load(NULL, true, c))
					squash_catalogs_free(c);
				else
					*loaded = true;
			}
			squash_catalog_missing_hint(*loaded ? c : NULL, what, hint, sizeof hint);
		}
		fprintf(stderr, "squash-images: %s: %s%s\n", shown, strerror(open_errno), hint);
		return 1;
	}
	if (fstat(fd, &st) || squash_superblock_check_fd(fd, SQUASH_READER_ANY, &sb, why, sizeof why)) {
		fprintf(stderr, "squash-images: %s: %s\n", shown, why);
		goto out;
	}
	if (json)
		printf("{");
	if (e && json) {
		printf("\"reference\":\"@%s/%s\",\"name\":\"%s\",\"version\":\"%s\",\"source\":\"%s\","
		       "\"catalog\":", e->name, e->version, e->name, e->version, source_name(where));
		json_write_string(stdout, where->dir);
		printf(",\"description\":");
		json_write_string(stdout, e->description);
		printf(",");
	} else if (e) {
		printf("image:       @%s/%s%s\nsource:      %s catalog %s\ndescription: %s\n", e->name,
		       e->version, squash_catalog_index_find(&where->index, e->name, NULL) == e ?
		       " (the newest)" : "", source_name(where), where->dir, e->description);
	}
	print_facts(path, &st, &sb, json);
	if (json)
		printf(",\"metadata\":");
	fflush(stdout);
	if (squash_image_meta_show(path, json, stdout, &has_meta, why, sizeof why)) {
		if (json) {
			printf("null,\"metadata_error\":");
			json_write_string(stdout, why);
			printf("}\n");
		}
		fprintf(stderr, "squash-images: %s\n", why);
		goto out;
	}
	if (json)
		printf("}\n");
	else if (!has_meta)
		container_root_note(path, stdout);
	rc = 0;
out:
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "catalog", required_argument, NULL, 'c' },
		{ "description", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct publish_request pub = { 0 };
	struct squash_catalogs c;
	const char *cmd;
	int opt, rc, args;
	bool failed;

	while ((opt = getopt_long(argc, argv, "jc:d:h", options, NULL)) != -1) {
		switch (opt) {
		case 'j': pub.json = true; break;
		case 'c': pub.catalog = optarg; break;
		case 'd': pub.description = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind++];
	if (!strcmp(cmd, "publish")) {
		if (argc - optind != 2) {
			fprintf(stderr, "squash-images: publish IMAGE NAME/VERSION [--catalog DIR] "
				"[--description TEXT]\n");
			return 2;
		}
		pub.image = argv[optind];
		pub.reference = argv[optind + 1];
		return squash_images_publish(&pub);
	}
	if (!strcmp(cmd, "activate")) {
		if (argc - optind != 1 || pub.json || pub.catalog || pub.description) {
			fprintf(stderr, "squash-images: activate [IMAGE:]ENV[,...]\n");
			puts("false"); /* for the caller's eval, as every error of activate */
			return 2;
		}
		return squash_images_activate(argv[optind], stdout);
	}
	args = argc - optind;
	/* find without TEXT lists them all, as uenv image find does. */
	if ((pub.catalog || pub.description) ||
	    (!strcmp(cmd, "list") ? args != 0 : !strcmp(cmd, "find") ? args > 1 : args != 1) ||
	    (strcmp(cmd, "list") && strcmp(cmd, "find") && strcmp(cmd, "inspect"))) {
		fprintf(stderr, "squash-images: bad command line (see squash-images --help)\n");
		return 2;
	}
	bool file = !strcmp(cmd, "inspect") && !squash_catalog_is_ref(argv[optind]);
	bool loaded = false;

	if (!file) {
		if (squash_catalogs_load(NULL, true, &c)) {
			fprintf(stderr, "squash-images: out of memory\n");
			return 1;
		}
		loaded = true;
	}
	failed = !file && report_problems(&c) && strcmp(cmd, "inspect");
	if (!strcmp(cmd, "inspect"))
		rc = inspect(&c, &loaded, argv[optind], pub.json);
	else
		rc = show_entries(&c, args ? argv[optind] : NULL, pub.json);
	if (loaded)
		squash_catalogs_free(&c);
	return rc ? rc : failed ? 1 : 0;
}
