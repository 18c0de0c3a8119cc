"""The embedded default broker (`filesystem://`): kombu's filesystem transport without its torn-message race.

kombu writes a message by opening its final name and then writing it; a worker listing the folder meanwhile moves
the still-empty file and reads it, and `json.loads("")` raises in the worker's consumer loop, which stops the worker
(celery/kombu#1551; the lab's worker died so after ~17 minutes). Here a message is written under a name no reader
takes, then renamed to its message name, which is atomic: a reader sees a whole message or none. A reader still
meets files other writers leave (a producer running kombu's own transport, a truncated disk): an empty file is left
alone while it may still be being written, and a file that is not a message is set aside in the rejected folder
with a warning, and the next message is taken.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
import uuid
from queue import Empty
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

# How long an empty message file is given to be written by a producer that writes in place (kombu's own).
UNWRITTEN_GRACE_SECONDS = 5.0


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        """Write the message under a hidden name in the same folder, then rename it to its message name."""
        name = f"{round(time.monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        descriptor, temporary = tempfile.mkstemp(prefix=".", suffix=".part", dir=self.data_folder_out)
        try:
            with os.fdopen(descriptor, "wb") as part:
                part.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, os.path.join(self.data_folder_out, name))
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise ChannelError(f"Cannot add file {name!r} to directory") from error

    def _get(self, queue: str) -> Any:
        """The oldest whole message of `queue`; what is not one is set aside, never raised in the consumer."""
        wanted = f"{queue}.msg"
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.partition(".")[2] != wanted:
                continue
            path = os.path.join(self.data_folder_in, filename)
            try:
                stat = os.stat(path)
            except OSError:
                continue  # taken by another consumer meanwhile
            if stat.st_size == 0 and time.time() - stat.st_mtime < UNWRITTEN_GRACE_SECONDS:
                continue  # perhaps still being written in place: looked at again later
            processed = self.processed_folder if self.store_processed else tempfile.gettempdir()
            try:
                shutil.move(path, processed)
            except OSError:
                continue
            moved = os.path.join(processed, filename)
            try:
                with open(moved, "rb") as message:
                    payload = message.read()
            except OSError as error:
                raise ChannelError(f"Cannot read file {moved!r} from queue.") from error
            try:
                decoded = loads(bytes_to_str(payload))
            except ValueError as error:
                self._reject(moved, filename, len(payload), error)
                continue
            if not self.store_processed:
                os.remove(moved)
            return decoded
        raise Empty()

    def _reject(self, path: str, filename: str, size: int, error: ValueError) -> None:
        folder = self.transport_options.get("rejected_folder")
        where = "removed"
        try:
            if folder:
                shutil.move(path, os.path.join(folder, filename))
                where = f"moved to {folder}"
            else:
                os.remove(path)
        except OSError:
            where = "left where it was"
        logger.warning(
            "filesystem broker: %s on queue %s is not a message (%d bytes: %s); set aside (%s), the next is taken",
            filename,
            filename.partition(".")[2].removesuffix(".msg"),
            size,
            error,
            where,
        )


class Transport(filesystem.Transport):
    Channel = Channel
