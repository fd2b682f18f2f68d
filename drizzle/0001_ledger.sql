CREATE TABLE `discrepancies` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`thread_id` integer,
	`description` text NOT NULL,
	`severity` text NOT NULL,
	`source_msg_id` integer,
	`recorded_by` text NOT NULL,
	`status` text NOT NULL,
	`resolved_by` text,
	`created_at` text NOT NULL,
	`resolved_at` text,
	PRIMARY KEY(`room`, `id`)
);
--> statement-breakpoint
CREATE TABLE `handshakes` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`agent_id` text NOT NULL,
	`context_hash` text NOT NULL,
	`auth` text NOT NULL,
	`pubkey_hex` text,
	`signature_hex` text,
	`ts` text,
	`nonce` text,
	`created_at` text NOT NULL,
	PRIMARY KEY(`room`, `id`)
);
--> statement-breakpoint
CREATE TABLE `revisions` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`thread_id` integer NOT NULL,
	`kind` text NOT NULL,
	`value` text NOT NULL,
	`author_agent_id` text NOT NULL,
	`auth` text NOT NULL,
	`via` text NOT NULL,
	`source_msg_id` integer,
	`quote` text,
	`created_at` text NOT NULL,
	PRIMARY KEY(`room`, `id`)
);
--> statement-breakpoint
CREATE INDEX `revisions_thread` ON `revisions` (`room`,`thread_id`);--> statement-breakpoint
CREATE TABLE `threads` (
	`room` text NOT NULL,
	`id` integer NOT NULL,
	`subject` text NOT NULL,
	`subject_key` text NOT NULL,
	`current_value` text NOT NULL,
	`status` text NOT NULL,
	`opened_by` text NOT NULL,
	`opened_by_auth` text NOT NULL,
	`opener_key` text,
	`revisions_count` integer NOT NULL,
	`last_revision` text NOT NULL,
	`confirmations` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`room`, `id`)
);
--> statement-breakpoint
ALTER TABLE `rooms` ADD `arbiter_watermark` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `rooms` ADD `arbiter_calls` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `rooms` ADD `arbiter_tokens` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `rooms` ADD `arbiter_items` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `rooms` ADD `last_extraction_error` text;