-- the tables of index schema 3: create_schema of 7ba2716:schemas/index/schema.py
CREATE TABLE "roots" (
   "path" TEXT PRIMARY KEY,
   "added_ns" INTEGER
);
CREATE TABLE "files" (
   "id" INTEGER PRIMARY KEY,
   "path" TEXT NOT NULL,
   "inode" INTEGER,
   "size" INTEGER,
   "mtime_ns" INTEGER,
   "side" TEXT,
   "kind" TEXT,
   "rank" INTEGER,
   "token" INTEGER,
   "model" TEXT,
   "run" TEXT,
   "device" INTEGER,
   "model_id" INTEGER,
   "op_type" TEXT,
   "op_name" TEXT,
   "header_op_name" TEXT,
   "io" TEXT,
   "io_index" INTEGER,
   "io_sub_index" INTEGER,
   "timestamp" TEXT,
   "dump_time" TEXT,
   "mapped_name" TEXT,
   "state" TEXT NOT NULL,
   "error" TEXT,
   "attempts" INTEGER NOT NULL DEFAULT 0,
   "summaries" INTEGER NOT NULL DEFAULT 0,
   "raw_deleted" INTEGER NOT NULL DEFAULT 0,
   "bytes" INTEGER,
   "commit_seq" INTEGER,
   "indexed_ns" INTEGER NOT NULL,
   "dev" INTEGER
);
CREATE UNIQUE INDEX files_path ON files(path);
CREATE TABLE "tensors" (
   "file_id" INTEGER REFERENCES "files"("id"),
   "position" INTEGER,
   "io" TEXT NOT NULL,
   "io_index" INTEGER NOT NULL,
   "io_sub_index" INTEGER,
   "kind" TEXT NOT NULL,
   "dtype" TEXT,
   "shape" TEXT,
   "device_format" TEXT,
   "device_shape" TEXT,
   "has_summary" INTEGER NOT NULL,
   "numel" INTEGER,
   "min" REAL,
   "max" REAL,
   "mean" REAL,
   "l2norm" REAL,
   "nan_count" INTEGER,
   "inf_count" INTEGER,
   "crc32" INTEGER,
   "float_flags" INTEGER NOT NULL DEFAULT 0,
   "notes" TEXT,
   "original_op" TEXT,
   "original_op_index" INTEGER,
   PRIMARY KEY ("file_id", "position")
);
CREATE TABLE "graphs" (
   "file_id" INTEGER PRIMARY KEY REFERENCES "files"("id"),
   "name" TEXT,
   "warnings" TEXT,
   "op_count" INTEGER
);
CREATE TABLE "graph_ops" (
   "file_id" INTEGER REFERENCES "files"("id"),
   "op_order" INTEGER,
   "name" TEXT NOT NULL,
   "type" TEXT NOT NULL,
   "inputs" TEXT NOT NULL,
   "control_inputs" TEXT NOT NULL,
   "outputs" TEXT NOT NULL,
   "original_op_names" TEXT NOT NULL,
   "stack_info" TEXT,
   PRIMARY KEY ("file_id", "op_order")
);
CREATE TABLE "commits" (
   "seq" INTEGER PRIMARY KEY,
   "committed_ns" INTEGER,
   "files" INTEGER,
   "bytes" INTEGER,
   "raw_deleted" INTEGER,
   "raw_deleted_bytes" INTEGER
);
CREATE TABLE "daemon_state" (
   "id" INTEGER PRIMARY KEY,
   "pid" INTEGER,
   "host" TEXT,
   "started_ns" INTEGER,
   "heartbeat_ns" INTEGER,
   "stopped_ns" INTEGER,
   "roots" TEXT,
   "queued" INTEGER,
   "in_flight" INTEGER,
   "pending" INTEGER
);
CREATE INDEX files_problems ON files(state, indexed_ns) WHERE state != 'summarized';
PRAGMA user_version = 3;
