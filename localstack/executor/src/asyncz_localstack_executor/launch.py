"""Start the LocalStack runtime in host mode, keeping all its files under ``TMPDIR``.

``python -m asyncz_localstack_executor.launch`` is ``python -m localstack.runtime.main``
except that S3's object store, hard-coded to ``/tmp/localstack-s3-storage``, moves into
the temp folder the start script gives LocalStack, so stopping leaves nothing outside it.
"""

import os
import tempfile


def main() -> None:
    from localstack.services.s3 import provider as s3_provider

    # Read when the S3 provider is created (lazily, at the first S3 request).
    s3_provider.DEFAULT_S3_TMP_DIR = os.path.join(tempfile.gettempdir(), "localstack-s3-storage")

    from localstack.runtime.main import main as runtime_main

    runtime_main()


if __name__ == "__main__":
    main()
