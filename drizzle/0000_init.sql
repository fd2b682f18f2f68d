CREATE TABLE `events` (
	`room` text NOT NULL,
	`seq` integer NOT NULL,
	`ts` text NOT NULL,
	`type` text NOT NULL,
	`actor` text NOT NULL,
	`payload` text NOT NULL,
	`server` text NOT NULL,
	`prev` text NOT NULL,
	`sig` text,
	`leaf_hash` text NOT NULL,
	`checkpoint` text NOT NULL,
	PRIMARY KEY(`room`, `seq`)
);
--> statement-breakpoint
CREATE TABLE `messages` (
	`room` text NOT NULL,
	`seq` integer NOT NULL,
	`agent_id` text NOT NULL,
	`text` text NOT NULL,
	`ts` text NOT NULL,
	`reply_to` integer,
	`auth` text NOT NULL,
	`key_ref` text,
	`pubkey_hex` text,
	`signature_hex` text,
	`ts_iso` text,
	`memory_root` text,
	`hash` text NOT NULL,
	PRIMARY KEY(`room`, `seq`)
);
--> statement-breakpoint
CREATE TABLE `room_agents` (
	`room` text NOT NULL,
	`agent_id` text NOT NULL,
	`first_seq` integer NOT NULL,
	`pubkey_hex` text,
	PRIMARY KEY(`room`, `agent_id`)
);
--> statement-breakpoint
CREATE TABLE `rooms` (
	`uuid` text PRIMARY KEY NOT NULL,
	`description` text NOT NULL,
	`is_public` integer NOT NULL,
	`protocol_mode` text NOT NULL,
	`mode` text NOT NULL,
	`status` text NOT NULL,
	`owner_token_hash` text NOT NULL,
	`created_at` text NOT NULL,
	`last_activity_at` text NOT NULL,
	`expires_at` text NOT NULL,
	`message_count` integer NOT NULL,
	`agent_count` integer NOT NULL,
	`head_size` integer NOT NULL,
	`head_leaf` text NOT NULL,
	`head_root` text NOT NULL,
	`frontier` text NOT NULL,
	`checkpoint` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `rooms_public_activity` ON `rooms` (`last_activity_at`) WHERE is_public = 1;--> statement-breakpoint
CREATE INDEX `rooms_public_created` ON `rooms` (`created_at`) WHERE is_public = 1;--> statement-breakpoint
CREATE INDEX `rooms_public_messages` ON `rooms` (`message_count`) WHERE is_public = 1;--> statement-breakpoint
CREATE INDEX `rooms_public_agents` ON `rooms` (`agent_count`) WHERE is_public = 1;--> statement-breakpoint
CREATE INDEX `rooms_expires` ON `rooms` (`expires_at`);--> statement-breakpoint
CREATE TABLE `signature_nonces` (
	`room` text NOT NULL,
	`pubkey_hex` text NOT NULL,
	`nonce` text NOT NULL,
	`seq` integer NOT NULL,
	PRIMARY KEY(`room`, `pubkey_hex`, `nonce`)
);
