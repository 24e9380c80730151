/* Whether an image is a container's root file system (see
 * container_root_note.h). */
#include "config.h"

#include <stdlib.h>
#include <sys/wait.h>

#include "cli/container_root_note.h"
#include "cli/reader_cat.h"

/* Whether the image has inner, of any kind (a directory, or a link, which
 * the reader never follows: etc/os-release is often one). The file's bytes
 * are not wanted; one past the bound is there all the same. */
static bool image_has(const char *image, const char *inner, char *buf)
{
	struct reader_cat_result r = { .out = buf };
	char err[256];

	if (reader_cat_run(image, -1, inner, &r, err, sizeof err))
		return false;
	if (r.timed_out)
		return false;
	return r.too_long || (WIFEXITED(r.status) && (WEXITSTATUS(r.status) == 0 ||
				WEXITSTATUS(r.status) == SQUASH_READER_CAT_NOT_REGULAR));
}

bool container_root_note(const char *image_path, FILE *out)
{
	char *buf = malloc(SQUASH_READER_CAT_MAX + 1), *arg = NULL;
	bool root_fs;

	/* A path starting with '-' must not be taken for an option. */
	if (!buf || asprintf(&arg, "%s%s", image_path[0] == '/' ? "" : "./", image_path) < 0) {
		free(buf);
		return false;
	}
	/* usr/bin only when etc/os-release is there: one reader run for most. */
	root_fs = image_has(arg, "etc/os-release", buf) && image_has(arg, "usr/bin", buf);
	if (root_fs)
		fprintf(out, "note:        a container's root file system (it has etc/os-release and "
			"usr/bin): its programs expect to be at '/', so it is for Pyxis/enroot or "
			"Apptainer, not for a mount at /squash/NAME; to use a prefix from it, extract "
			"that directory and pack it (unsquashfs -d DIR IMAGE opt/TOOL; squash-pack "
			"--relocate-from /opt/TOOL DIR/opt/TOOL TOOL.sqfs)\n");
	free(arg);
	free(buf);
	return root_fs;
}
