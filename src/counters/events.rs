//! Backend module `events` (filled by its issue).
