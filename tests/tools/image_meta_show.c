/* image_meta_show [--json] IMAGE: squash_image_meta_show for the tests
 * (test_image_meta_show.sh) until `squash-images inspect` calls it. Exit 0
 * shown, 1 refused (the reason on stderr), 2 usage. */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/image_meta_show.h"

int main(int argc, char **argv)
{
	bool json = argc == 3 && !strcmp(argv[1], "--json");
	char err[1024];

	if (argc != 2 && !json) {
		fprintf(stderr, "usage: image_meta_show [--json] IMAGE\n");
		return 2;
	}
	if (squash_image_meta_show(argv[argc - 1], json, stdout, err, sizeof err) != 0) {
		fprintf(stderr, "image_meta_show: %s\n", err);
		return 1;
	}
	return 0;
}
