/* squash-images: the catalogs' command (squash-images(1)). list, find and
 * inspect in squash_images.c, publish in squash_images_publish.c, activate
 * in squash_images_activate.c. */
#ifndef SQUASH_IMAGES_H
#define SQUASH_IMAGES_H

#include <stdbool.h>
#include <stdio.h>

#define SQUASH_IMAGES_DESCRIPTION_MAX 1024

struct publish_request {
	const char *image;       /* the file to publish */
	const char *reference;   /* NAME/VERSION */
	const char *catalog;     /* NULL: the first site catalog (root) or the user's */
	const char *description; /* NULL: none */
	bool json;
};

/* Copies the image into the catalog and adds it to the index; prints what
 * was published. Returns the exit status (0, or 1 after saying why). */
int squash_images_publish(const struct publish_request *req);

/* Prints to out the shell commands that apply environments names (as
 * --squash-env's text) of the images this step or session sees. Returns
 * the exit status (0; 1 after saying why, with "false" printed so that
 * an eval of the output fails too; 2 for a bad command line). */
int squash_images_activate(const char *names, FILE *out);

#endif
