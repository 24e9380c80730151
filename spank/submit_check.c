/* Submit-time check of --squash-image (see submit_check.h). squashd checks
 * everything again with the job user's identity; this check exists so that
 * mistakes are reported at once, on the submitter's terminal. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imagespec.h"
#include "submit_check.h"
#include "superblock.h"

/* Resolves the image against the working directory and replaces it with
 * the absolute path. */
static int resolve_image(struct squash_image_spec *item)
{
	char *abs = realpath(item->image, NULL);

	if (!abs) {
		slurm_error("squash: %s: %s", item->image, strerror(errno));
		return -1;
	}
	/* The option syntax cannot carry these; a symlink may introduce them. */
	if (strpbrk(abs, ",:")) {
		slurm_error("squash: %s: its real path %s contains ',' or ':', which --squash-image cannot carry",
			    item->image, abs);
		free(abs);
		return -1;
	}
	free(item->image);
	item->image = abs;
	return 0;
}

/* Opens the image as the user (this runs as the user) and checks it is a
 * regular file with a sane squashfs superblock. */
static int check_image(const char *image)
{
	char why[256];
	struct stat st;
	int fd, rc = -1;

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

/* Fills in a missing target and checks it against the allowed prefixes. */
static int check_target(struct squash_image_spec *item,
			const struct squash_settings *s)
{
	char why[256];

	if (!item->target) {
		char buf[SQUASH_PATH_MAX];

		if (squash_default_target(item->image, s->default_target, buf,
					  sizeof buf, why, sizeof why)) {
			slurm_error("squash: %s: %s", item->image, why);
			return -1;
		}
		item->target = strdup(buf);
		if (!item->target) {
			slurm_error("squash: out of memory");
			return -1;
		}
	}
	if (squash_target_check(item->target, &s->allowed, why, sizeof why)) {
		slurm_error("squash: %s: %s", item->image, why);
		return -1;
	}
	return 0;
}

static int check_duplicates(const struct squash_image_list *list)
{
	for (size_t i = 0; i < list->count; i++)
		for (size_t j = 0; j < i; j++)
			if (!strcmp(list->items[i].target, list->items[j].target)) {
				slurm_error("squash: %s and %s would both be mounted on %s; give one of them another target (IMAGE:TARGET)",
					    list->items[j].image, list->items[i].image,
					    list->items[i].target);
				return -1;
			}
	return 0;
}

/* Hands the canonical list to the prolog, which sees SPANK_SQUASH_IMAGES. */
static int hand_to_prolog(spank_t sp, const struct squash_image_list *list)
{
	struct squash_image_list again;
	char why[256];
	char *text = squash_imagespec_format(list);
	spank_err_t rc;

	if (!text) {
		slurm_error("squash: out of memory");
		return -1;
	}
	/* What the prolog parses must be what was checked here. */
	if (squash_imagespec_parse(text, &again, why, sizeof why)) {
		slurm_error("squash: cannot pass the image list to the job: %s", why);
		free(text);
		return -1;
	}
	squash_imagespec_free(&again);
	rc = spank_job_control_setenv(sp, "SQUASH_IMAGES", text, 1);
	if (rc != ESPANK_SUCCESS)
		slurm_error("squash: cannot pass the image list to the job: %s",
			    spank_strerror(rc));
	free(text);
	return rc == ESPANK_SUCCESS ? 0 : -1;
}

int squash_submit_check(spank_t sp, const char *option,
			const struct squash_settings *s)
{
	struct squash_image_list list;
	char why[512];
	int rc = -1;

	if (!option)
		return 0;
	/* srun inside sbatch/salloc inherits the option; the job's images were
	 * fixed when the allocation was made, and its steps get those. */
	if (spank_context() == S_CTX_LOCAL && getenv("SLURM_JOB_ID"))
		return 0;

	if (squash_imagespec_parse(option, &list, why, sizeof why)) {
		slurm_error("squash: --squash-image=%s: %s", option, why);
		return -1;
	}
	for (size_t i = 0; i < list.count; i++) {
		struct squash_image_spec *item = &list.items[i];

		if (resolve_image(item) || check_image(item->image) ||
		    check_target(item, s))
			goto out;
	}
	if (check_duplicates(&list) == 0)
		rc = hand_to_prolog(sp, &list);
out:
	squash_imagespec_free(&list);
	return rc;
}

int squash_submit_check_list(const char *option, const struct squash_settings *s,
			     struct squash_image_list *list)
{
	char why[512];

	if (squash_imagespec_parse(option, list, why, sizeof why)) {
		slurm_error("squash: --squash-image=%s: %s", option, why);
		return -1;
	}
	for (size_t i = 0; i < list->count; i++)
		if (resolve_image(&list->items[i]) || check_image(list->items[i].image) ||
		    check_target(&list->items[i], s))
			goto bad;
	if (check_duplicates(list) == 0)
		return 0;
bad:
	squash_imagespec_free(list);
	return -1;
}
